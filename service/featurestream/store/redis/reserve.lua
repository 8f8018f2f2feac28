-- KEYS[1] the tenant's index (sorted set: stream id -> when it was last reserved)
-- ARGV[1] stream id  ARGV[2] quota  ARGV[3] now (Unix seconds)
-- Returns 1 when the id is reserved (or already in the index, then renewed: the create
-- finds the stream, or completes one that was interrupted), 0 when the tenant holds
-- its quota of streams.
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  return 1
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
