-- Shared by legacy.lua and modern.lua: the headers every tools/call carries, the optional
-- answer check, and one JSON line of results for bench/run.py.
-- Environment: BENCH_TOKEN (agent token), BENCH_CHECK=1 to check every answer's status and body,
-- BENCH_DELAY_MS=N to pause N ms before each request (a paced load, below its maximum rate).

local M = {}

function M.request(body, headers)
  wrk.method = "POST"
  wrk.body = body
  wrk.headers["Authorization"] = "Bearer " .. (os.getenv("BENCH_TOKEN") or "")
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["Content-Type"] = "application/json"
  for name, value in pairs(headers) do
    wrk.headers[name] = value
  end
end

local threads = {}

-- wrk waits delay() milliseconds before sending each request when the function is defined;
-- its latency figures count from the send, so the pause is not in them.
local delay_ms = tonumber(os.getenv("BENCH_DELAY_MS") or "0")
if delay_ms > 0 then
  function delay()
    return delay_ms
  end
end

function setup(thread)
  table.insert(threads, thread)
end

checked = 0
bad = 0
first_bad = ""

-- wrk calls response() only when it is defined, and then hands every header and body to
-- Lua, which costs load generator CPU: so it is defined only for checking runs.
if os.getenv("BENCH_CHECK") == "1" then
  function response(status, headers, body)
    checked = checked + 1
    if status ~= 200 or not string.find(body, '"result"', 1, true)
        or string.find(body, '"isError":true', 1, true) then
      bad = bad + 1
      if first_bad == "" then
        first_bad = tostring(status) .. " " .. string.sub(body, 1, 300)
      end
    end
  end
end

local function json_string(text)
  return '"' .. string.gsub(text, '[%c"\\]', function(c) return string.format("\\u%04x", string.byte(c)) end) .. '"'
end

function done(summary, latency, requests)
  local total_checked, total_bad, sample = 0, 0, ""
  for _, thread in ipairs(threads) do
    total_checked = total_checked + (thread:get("checked") or 0)
    total_bad = total_bad + (thread:get("bad") or 0)
    local first = thread:get("first_bad") or ""
    if sample == "" then sample = first end
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d},"latency_us":{"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"mean":%.1f},' ..
    '"checked":%d,"bad":%d,"first_bad":%s}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    latency.max, latency.mean, total_checked, total_bad, json_string(sample)))
end

return M
