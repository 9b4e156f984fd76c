-- Prints wrk's summary as one JSON line (prefixed so it can be told apart from wrk's own text).
-- Latencies are in microseconds.
done = function(summary, latency, requests)
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"mean":%.1f,"p50":%d,"p99":%d,"max":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout,
    latency.mean, latency:percentile(50), latency:percentile(99), latency.max))
end
