-- KEYS[1] meta  KEYS[2] state  KEYS[3] events  KEYS[4] producers  KEYS[5] responses
-- KEYS[6] replays (the stored responses' fields by age)  KEYS[7] names log  KEYS[8] names ids
-- KEYS[9] producers seen (producer -> ms of its last write)
-- ARGV[1] commit id  ARGV[2] incarnation  ARGV[3] expected version  ARGV[4] expected last
-- commit id  ARGV[5] state blob  ARGV[6] updated_at  ARGV[7] selection JSON
-- ARGV[8] status JSON  ARGV[9] events payload  ARGV[10] producer ('' = none)
-- ARGV[11] number P of (seq, response) pairs  ARGV[12] replay window  ARGV[13] channel
-- ARGV[14] notification ('' = none; SPUBLISHed on Redis >= 7, else PUBLISHed)
-- ARGV[15] '1' when the state changes, '0' for a commit of producer records only
-- ARGV[16] event retention (log entries kept)
-- ARGV[17] replay bytes (stored-response bytes kept)
-- ARGV[18 .. 17+2P] seq_1, response_1, ..., seq_P, response_P (ascending; the producer's
-- last seq becomes seq_P)  ARGV[18+2P] the new feature names, joined by newlines
-- ARGV[19+2P] the entries of the names log the caller looked the names up in, ARGV[20+2P]
-- the id of the last of them ('' for none)  ARGV[21+2P] when the producer wrote, in ms
-- ('' = no time: a log's partition)  ARGV[22+2P] number D of producers to drop
-- ARGV[23+2P .. 22+2P+D] their names (each forgotten whole: seq, time, stored responses)
-- Returns {version, appended}: the new version (the current one for a records-only
-- commit), or -1 on an incarnation, version or last-commit mismatch, -2 when the stream
-- is gone, -4 when the names log does not end where the caller looked (see
-- RedisStore.commit; nothing is written then); appended is 1 when the names went to the
-- log as its next entry. The names are not looked up here (the caller did, in its copy
-- of the log: store/names.py), only appended, as one entry. A commit whose id is already
-- recorded returns the current version (a retried call). Every
-- commit records its id as the last commit id. The stored
-- responses are trimmed to the replay window per producer, then to the replay bytes per
-- stream, oldest first (never those of this commit). A stream created with a time to live
-- ('ttl_ms' in its meta) has the expiry of every key set again to it by each commit.
local meta = redis.call('HMGET', KEYS[1], 'version', 'incarnation', 'commit_id', 'replay_bytes',
                        'ttl_ms')
if not meta[1] then return {-2, 0} end
if meta[2] == ARGV[2] and meta[3] == ARGV[1] then return {tonumber(meta[1]), 0} end
if meta[2] ~= ARGV[2] or tonumber(meta[1]) ~= tonumber(ARGV[3])
   or (meta[3] or '') ~= ARGV[4] then return {-1, 0} end
local v = tonumber(meta[1])
local pairs_n = tonumber(ARGV[11])
local appended = 0
if ARGV[15] == '1' then
  local names = ARGV[18 + 2 * pairs_n]
  if names ~= '' then
    local n = redis.call('LLEN', KEYS[8])
    if n ~= tonumber(ARGV[19 + 2 * pairs_n])
       or (n > 0 and redis.call('LINDEX', KEYS[8], -1) ~= ARGV[20 + 2 * pairs_n]) then
      return {-4, 0}
    end
  end
  v = v + 1
  redis.call('SET', KEYS[2], ARGV[5])
  redis.call('HSET', KEYS[1], 'version', v, 'updated_at', ARGV[6], 'selection', ARGV[7],
             'status', ARGV[8], 'commit_id', ARGV[1])
  redis.call('XADD', KEYS[3], 'MAXLEN', '=', ARGV[16], v .. '-0', 'e', ARGV[9])
  if names ~= '' then
    redis.call('RPUSH', KEYS[7], names)
    redis.call('RPUSH', KEYS[8], ARGV[1])
    appended = 1
  end
else
  redis.call('HSET', KEYS[1], 'commit_id', ARGV[1])
end
local window = tonumber(ARGV[12])
local bytes = tonumber(meta[4] or '0')
local drops = tonumber(ARGV[22 + 2 * pairs_n])
for d = 1, drops do
  local gone = ARGV[22 + 2 * pairs_n + d]
  -- Its stored responses are its latest seqs, consecutive (both trims drop its oldest
  -- first): walk down from its last seq to the first one not stored, so the work is
  -- what is stored, not the replay window.
  local seq = tonumber(redis.call('HGET', KEYS[4], gone) or '0')
  local stop = math.max(1, seq - window + 1)
  while seq >= stop do
    local field = gone .. '\n' .. string.format('%d', seq)
    local size = redis.call('HSTRLEN', KEYS[5], field)
    if size == 0 and redis.call('HEXISTS', KEYS[5], field) == 0 then break end
    bytes = bytes - size
    redis.call('HDEL', KEYS[5], field)
    redis.call('ZREM', KEYS[6], field)
    seq = seq - 1
  end
  redis.call('HDEL', KEYS[4], gone)
  redis.call('HDEL', KEYS[9], gone)
end
if drops > 0 then
  if bytes < 0 then bytes = 0 end
  redis.call('HSET', KEYS[1], 'replay_bytes', bytes)
end
if ARGV[10] ~= '' and pairs_n > 0 then
  local serial = redis.call('HINCRBY', KEYS[1], 'replay_serial', pairs_n) - pairs_n
  for p = 0, pairs_n - 1 do
    local seq = tonumber(ARGV[18 + 2 * p])
    -- The seq as given: a log's positions are beyond what a Lua number prints exactly.
    local field = ARGV[10] .. '\n' .. ARGV[18 + 2 * p]
    local body = ARGV[19 + 2 * p]
    bytes = bytes - redis.call('HSTRLEN', KEYS[5], field) + #body
    redis.call('HSET', KEYS[5], field, body)
    redis.call('ZADD', KEYS[6], serial + p + 1, field)
    local old = seq - window
    if old > 0 then
      local gone = ARGV[10] .. '\n' .. old
      bytes = bytes - redis.call('HSTRLEN', KEYS[5], gone)
      redis.call('HDEL', KEYS[5], gone)
      redis.call('ZREM', KEYS[6], gone)
    end
  end
  local limit = tonumber(ARGV[17])
  while bytes > limit and redis.call('ZCARD', KEYS[6]) > pairs_n do
    local oldest = redis.call('ZPOPMIN', KEYS[6])
    bytes = bytes - redis.call('HSTRLEN', KEYS[5], oldest[1])
    redis.call('HDEL', KEYS[5], oldest[1])
  end
  if bytes < 0 then bytes = 0 end
  redis.call('HSET', KEYS[1], 'replay_bytes', bytes)
  redis.call('HSET', KEYS[4], ARGV[10], ARGV[16 + 2 * pairs_n])
  if ARGV[21 + 2 * pairs_n] ~= '' then redis.call('HSET', KEYS[9], ARGV[10], ARGV[21 + 2 * pairs_n]) end
end
if ARGV[15] == '1' and ARGV[14] ~= '' then
  -- Sharded pub/sub from Redis 7 on (redis.REDIS_VERSION is new in 7.0): on a cluster the
  -- message goes to the stream's shard only; classic PUBLISH before.
  if redis.REDIS_VERSION then redis.call('SPUBLISH', ARGV[13], ARGV[14])
  else redis.call('PUBLISH', ARGV[13], ARGV[14]) end
end
local ttl = tonumber(meta[5] or '0') or 0
if ttl > 0 then
  for k = 1, #KEYS do redis.call('PEXPIRE', KEYS[k], ttl) end
end
return {v, appended}
