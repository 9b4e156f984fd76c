-- Prints wrk's summary as one JSON line (prefixed so it can be told apart from wrk's own text).
-- Latencies are in microseconds.
--
-- WRK_PAUSE_MS > 0 paces the run: every connection waits that long after each answer before sending
-- the next request (wrk only calls `delay` when the script defines it, so it is defined only then).
local pause = tonumber(os.getenv("WRK_PAUSE_MS") or "0") or 0
if pause > 0 then
  delay = function()
    return pause
  end
end

done = function(summary, latency, requests)
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"mean":%.1f,"p50":%d,"p99":%d,"p999":%d,"max":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout,
    latency.mean, latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
