/** How many refusals a route's condition message names before counting the rest. */
const NAMED = 3;

/**
 * One condition message for every refusal of a kind (each rule left out, each hostname refused), so a
 * route's PartiallyInvalid names all its refused rules, not the first alone; bounded, the rest
 * counted ("and 2 more"): the Events name each one.
 */
export function refusalSummary(messages: readonly string[]): string {
  const named = messages.slice(0, NAMED).join('; ');
  const more = messages.length - NAMED;
  return more > 0 ? `${named}; and ${more} more` : named;
}
