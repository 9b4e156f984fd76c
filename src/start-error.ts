/** A start-up problem, already worded as the one line to print (the CLI adds nothing to it). */
export class StartError extends Error {}

/**
 * What a failed start reports: a listener that could not be bound becomes the one line the CLI
 * prints ("tollgate: cannot listen on …"); any other error is passed on as it is.
 */
export function startErrorOf(error: unknown): unknown {
  return error instanceof Error && error.message.startsWith('cannot listen')
    ? new StartError(`tollgate: ${error.message}`)
    : error;
}
