-- The entries of a stream's names log since the first ``known`` (store/names.py), read
-- atomically with the stream's head.
-- KEYS[1] meta  KEYS[2] names ids  KEYS[3] names log
-- ARGV[1] known: entries the caller has  ARGV[2] the id of the last of them ('' for none)
-- ARGV[3] entries to return at most
-- Returns {version, incarnation, last commit id, entries in the log, from, ids, entries}:
-- the entries from ``from`` on, with their commits' ids; ``from`` is -1 (and nothing
-- follows) when the caller's entries are not the log's first ones any more (the id at
-- their end differs, or the log is shorter): it must read the log from the start.
local head = redis.call('HMGET', KEYS[1], 'version', 'incarnation', 'commit_id')
local n = redis.call('LLEN', KEYS[2])
local known = tonumber(ARGV[1])
if known > n or (known > 0 and redis.call('LINDEX', KEYS[2], known - 1) ~= ARGV[2]) then
  return {head[1], head[2], head[3], n, -1}
end
local last = math.min(n, known + tonumber(ARGV[3])) - 1
if last < known then return {head[1], head[2], head[3], n, known, {}, {}} end
return {head[1], head[2], head[3], n, known, redis.call('LRANGE', KEYS[2], known, last),
        redis.call('LRANGE', KEYS[3], known, last)}
