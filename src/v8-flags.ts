import { setFlagsFromString } from 'node:v8';

/**
 * V8 settings of the Tollgate process (and of each worker, which runs the same entry point). Imported
 * first by src/main.ts, so it runs before any other module allocates.
 *
 * Allocation-site pretenuring off: V8 watches where objects are allocated, and when most objects of
 * one allocation site survive a young-generation collection it starts allocating that site's objects
 * straight in the old generation. Starting Tollgate (loading its modules, parsing and compiling the
 * config) and every burst of slow requests make many of the sites the request path shares with them
 * look long-lived, after which per-request objects (requests, responses, header lists, ticks) were
 * born old: every young collection then scanned a growing old generation (scavenges of 5–50 ms instead
 * of about 1 ms) and a full mark-compact came every few seconds. Those pauses were the p99 stalls of
 * the paced benchmark (docs/benchmark.md). A proxy's objects live for one request; with pretenuring
 * off they die young, the old generation stays flat under load and young collections stay short.
 */
setFlagsFromString('--no-allocation-site-pretenuring');
