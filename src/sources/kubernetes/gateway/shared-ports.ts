import { holdsClaim, type ResolvedGateway, type ResolvedListener } from './listeners.ts';
import { condition } from './objects.ts';

/**
 * Where a listener is served: every HTTP listener on Tollgate's plain port, every HTTPS listener on
 * its TLS port (docs/gateway-api.md#gateways), whatever Gateway it belongs to.
 */
function servedOn(listener: ResolvedListener): string {
  return listener.protocol === 'HTTPS' ? 'tls' : 'plain';
}

/**
 * The Gateways with the listeners that would mix with an older one marked
 * (docs/gateway-api.md#listener-conflicts). One deployment serves all its Gateways on the same ports,
 * so two listeners served on the same port with the same hostname (both none included) would take
 * each other's requests; and two listeners declaring the same port with different protocols cannot
 * both be what that port is. `gateways` are oldest first: the older listener (then the earlier one of
 * a Gateway) keeps serving, the newer is `Conflicted` (HostnameConflict / ProtocolConflict), not
 * accepted, and no route attaches to it. Listeners refused for their own shape, and Gateways not
 * accepted, claim nothing. A copy: the resolved Gateways given are left as they are (they are shared
 * between translations: translation-cache.ts).
 */
export function withConflicts(gateways: readonly ResolvedGateway[]): ResolvedGateway[] {
  const held: ResolvedListener[] = [];
  return gateways.map((gateway) => {
    if (gateway.invalidParameters !== null) return gateway;
    const listeners = gateway.listeners.map((listener) => {
      if (!accepted(listener)) return listener;
      const protocol = held.find(
        (other) =>
          other.port !== null && other.port === listener.port && other.protocol !== listener.protocol,
      );
      const hostname = held.find(
        (other) => servedOn(other) === servedOn(listener) && other.hostname === listener.hostname,
      );
      const other = protocol ?? hostname;
      if (other === undefined) {
        held.push(listener);
        return {
          ...listener,
          conditions: [
            ...listener.conditions,
            condition(
              'Conflicted',
              false,
              'NoConflicts',
              'no other listener shares its port and hostname',
              gateway.generation,
            ),
          ],
        };
      }
      const reason = protocol ? 'ProtocolConflict' : 'HostnameConflict';
      const message = protocol
        ? `port ${listener.port} is already ${other.protocol} for listener ${other.name} of Gateway ${other.gatewayNamespace}/${other.gateway}`
        : `listener ${other.name} of Gateway ${other.gatewayNamespace}/${other.gateway} is older and serves ${listener.hostname ?? 'every hostname'} on the same port (one deployment per Gateway: kubernetes.gateway_names)`;
      return {
        ...listener,
        usable: false,
        conditions: [
          condition('Accepted', false, reason, message, gateway.generation),
          condition('Programmed', false, 'Invalid', message, gateway.generation),
          ...listener.conditions.filter((item) => item.type === 'ResolvedRefs'),
          condition('Conflicted', true, reason, message, gateway.generation),
        ],
      };
    });
    return { ...gateway, listeners };
  });
}

function accepted(listener: ResolvedListener): boolean {
  return holdsClaim(listener);
}
