import type { Stage, StageRequest } from '../request/record.ts';
import type { Verdict } from '../request/verdict.ts';
import type { ServerHealth } from '../upstream/health.ts';
import { createServerChoice } from '../upstream/server-choice.ts';
import { PASS, refuse } from './verdict.ts';

/**
 * The last stage: asks server choice (upstream/server-choice.ts, the one owner of "which server")
 * for `request.candidates`, the servers the forwarder tries in order, and turns "none may take it"
 * into the answer (500 backend_not_resolved, 503 no_ready_endpoints or no_healthy_upstream).
 */
export function createPickServerStage(deps: { health: ServerHealth }): Stage {
  const chooseServers = createServerChoice(deps);
  return function pickServer(request: StageRequest): Verdict {
    const refused = chooseServers(request);
    return refused === null ? PASS : refuse(refused);
  };
}
