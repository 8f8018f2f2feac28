-- KEYS[1] meta  KEYS[2] state  KEYS[3] events  KEYS[4] producers  KEYS[5] responses
-- KEYS[6] replays  KEYS[7] names log  KEYS[8] names ids  KEYS[9] producers seen
-- ARGV[1] info JSON  ARGV[2] incarnation  ARGV[3] state blob  ARGV[4] created_at
-- ARGV[5] selection JSON  ARGV[6] status JSON  ARGV[7] time to live in ms ('0': none)
-- Returns 1 when created, 0 when the stream already exists. A retried call that finds
-- its own incarnation returns 1 again.
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HGET', KEYS[1], 'incarnation') == ARGV[2] then return 1 end
  return 0
end
redis.call('UNLINK', KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9])
redis.call('HSET', KEYS[1], 'info', ARGV[1], 'incarnation', ARGV[2], 'version', 0,
           'updated_at', ARGV[4], 'selection', ARGV[5], 'status', ARGV[6], 'commit_id', '',
           'ttl_ms', ARGV[7])
redis.call('SET', KEYS[2], ARGV[3])
if tonumber(ARGV[7]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  redis.call('PEXPIRE', KEYS[2], ARGV[7])
end
return 1
