import { serviceRefText } from '../config/service-ref.ts';
import { compileRoutingTable } from '../routing/compile.ts';
import type { ConfigSnapshot, Snapshot } from '../snapshot.ts';
import { serviceRefs } from '../sources/kubernetes/use.ts';
import type { WorkerSnapshot } from './messages.ts';

/**
 * A control-plane snapshot in the shape the IPC channel carries (docs/workers.md): the merged
 * config, the masterkey, the endpoints of its `service:` references and the certificates; `seq`
 * numbers it, so a worker's answer names the one it serves.
 */
export function toWorkerSnapshot(seq: number, snapshot: ConfigSnapshot): WorkerSnapshot {
  return {
    seq,
    upstreams: snapshot.upstreams,
    masterkey: snapshot.masterkey,
    endpoints: serviceRefs(snapshot.upstreams).map((ref) => [
      serviceRefText(ref),
      [...snapshot.endpointsOf(ref)],
    ]),
    certificates: [...snapshot.certificates],
  };
}

/** What a worker's data plane applies: the same table the primary compiled (compile is pure). */
export function fromWorkerSnapshot(sent: WorkerSnapshot): Snapshot {
  const servers = new Map(sent.endpoints);
  return {
    table: compileRoutingTable(sent.upstreams, (ref) => servers.get(serviceRefText(ref)) ?? []),
    masterkey: sent.masterkey,
    certificates: sent.certificates,
  };
}
