import { Counter, Gauge } from 'prom-client';
import { registry } from '../../observe/metrics.ts';

// The Kubernetes watch families (docs/observability.md), on the registry the admin listener serves.

export const watchUp = new Gauge({
  name: 'tollgate_kubernetes_watch_up',
  help: '1 while every watch of this resource is connected and answering, 0 while one is retrying.',
  labelNames: ['resource'] as const,
  registers: [registry],
});

export const watchRestartsTotal = new Counter({
  name: 'tollgate_kubernetes_watch_restarts_total',
  help: 'List/watch cycles started over, by resource and reason (closed, timeout, gone, unauthorized, forbidden, server_error, unreachable).',
  labelNames: ['resource', 'reason'] as const,
  registers: [registry],
});

export const lastSyncTimestamp = new Gauge({
  name: 'tollgate_kubernetes_last_sync_timestamp_seconds',
  help: 'Unix time up to which the staler watch of this resource is known current (last list, event or bookmark).',
  labelNames: ['resource'] as const,
  registers: [registry],
});

export const endpointsDropped = new Gauge({
  name: 'tollgate_kubernetes_endpoints_dropped',
  help: 'Endpoints (or whole EndpointSlices) of watched Services left out of the routing table, by reason (address_type, not_ip, unspecified, link_local, multicast, broadcast, own_listener, port, malformed).',
  labelNames: ['reason'] as const,
  registers: [registry],
});

export const ingressRejected = new Gauge({
  name: 'tollgate_ingress_rejected',
  help: '1 while this Ingress (or part of it) is not served as written: left out, closed, or losing a conflict (docs/ingress.md).',
  labelNames: ['namespace', 'name'] as const,
  registers: [registry],
});

export const gatewayRoutes = new Gauge({
  name: 'tollgate_gateway_routes',
  help: 'Gateway API routes of our Gateways (1 per route), by kind, namespace, name and whether a parent accepted it (docs/gateway-api.md).',
  labelNames: ['kind', 'namespace', 'name', 'accepted'] as const,
  registers: [registry],
});
