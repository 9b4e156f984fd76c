/**
 * The names the watches and their health share (resource-watch.ts starts watches, watch-health.ts
 * folds their state into metrics): kept apart so that neither imports the other.
 */

/** The kinds of object Tollgate watches; also the `resource` label of the watch metrics. */
export type WatchedResource =
  | 'endpointslices'
  | 'configmaps'
  | 'ingresses'
  | 'ingressclasses'
  | 'services'
  | 'secrets'
  | 'namespaces'
  | 'gatewayclasses'
  | 'gateways'
  | 'httproutes'
  | 'grpcroutes'
  | 'referencegrants'
  | 'tollgatepolicies';

/** Why a list/watch cycle started over: the `reason` label of tollgate_kubernetes_watch_restarts_total. */
export type RestartReason =
  | 'closed' // the server ended the stream (its watch timeout, or a dropped connection)
  | 'timeout' // a list got no answer in time, or a watch sent nothing (not even a bookmark) for too long
  | 'gone' // 410: the resourceVersion was compacted away, relist
  | 'unauthorized' // 401
  | 'forbidden' // 403: RBAC
  | 'server_error' // any other HTTP error status
  | 'unreachable'; // no HTTP answer at all (refused, reset, DNS, TLS)
