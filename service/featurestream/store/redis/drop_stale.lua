-- KEYS[1] the tenant's index  ARGV[1] cutoff (Unix seconds)  ARGV[2..] ids whose stream
-- does not exist. Drops those last reserved before the cutoff (one renewed since, by a
-- create under way, stays). Returns how many it dropped.
local dropped = 0
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) <= tonumber(ARGV[1]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
    dropped = dropped + 1
  end
end
return dropped
