import type { Stage } from './context.ts';

/**
 * The request pipeline in BEHAVIOUR.md §4 order: to_https → rate limit → authentication → balance.
 * Forwarding is not a stage: it always comes last and always answers.
 * Each stage is built by its own module; this file only fixes the order.
 */
export function createPipeline(stages: {
  toHttps?: Stage;
  rateLimit?: Stage;
  authenticate?: Stage;
  balance: Stage;
}): readonly Stage[] {
  return Object.freeze(
    [stages.toHttps, stages.rateLimit, stages.authenticate, stages.balance].filter(
      (stage): stage is Stage => stage !== undefined,
    ),
  );
}
