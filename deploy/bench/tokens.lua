-- wrk script: every request carries "Authorization: Bearer <jwt>" with the
-- next pre-signed JWT from $TOKENS (one a line). Threads take interleaved
-- slices, so each token is used once per pass. $METHOD: GET (default) or POST.
-- A line "<jwt> <ticket>" also sends the ticket as X-Queue-Ticket.
local threads = {}
local counter = 0
function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
  table.insert(threads, thread)
end
function init(args)
  tokens = {}
  for line in io.lines(os.getenv("TOKENS")) do tokens[#tokens + 1] = line end
  idx = (tid or 0) + 1
  step = tonumber(os.getenv("WRK_THREADS") or "2")
  method = os.getenv("METHOD") or "GET"
end
function request()
  local t = tokens[idx]
  idx = idx + step
  if idx > #tokens then idx = (idx - 1) % step + 1 end
  local jwt, tk = string.match(t, "^(%S+) (%S+)$")
  if tk then
    return wrk.format(method, nil, { ["Authorization"] = "Bearer " .. jwt, ["X-Queue-Ticket"] = tk })
  end
  return wrk.format(method, nil, { ["Authorization"] = "Bearer " .. t })
end
