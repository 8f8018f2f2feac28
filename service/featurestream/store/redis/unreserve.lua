-- KEYS[1] the tenant's index  ARGV[1] stream id  ARGV[2] when this create reserved it
-- Gives the reservation back (a create refused before it wrote anything), unless it was
-- renewed or marked done since (another create of the same id). Returns 1 when removed.
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
