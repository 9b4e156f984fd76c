/**
 * The response every upstream returns (nginx's `return 200` and the Node upstream alike), in a module
 * of its own so that the reference processes can import it without pulling in the bench's process
 * bookkeeping.
 */
export const BODY_BYTES = 100;
export const BODY = 'x'.repeat(BODY_BYTES);
