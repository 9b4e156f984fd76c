/**
 * bcrypt hashes of known passwords, as `htpasswd -B` writes them (`$2y$`, low cost for speed). Fixed
 * strings rather than hashed at run time, so the tests depend on Tollgate's bcrypt check, not on a
 * second bcrypt implementation agreeing with it.
 */
export const BCRYPT: Readonly<Record<string, string>> = {
  wonderland: '$2y$05$41VJIvl3cku8/6Bg2RukWO6RiH5q4ktW63.FBmxhLlYit8SdYiN66',
  builder: '$2y$05$7TmbC7sYp9FcAaShDv1tbON.ANZWPIuSNygx/ywfTC5jzTYUT.J0y',
  'carols-password': '$2y$05$TLnTXPd5itGTrS7b3JRRROHRHDY7L/Abob2eLkSpZ7y4sK1/Gv23O',
  p: '$2y$04$6HrYr8V66oUr2QTgGUxG1upXu2kiPSNDZchsegfusu1nn79eI.7c6',
  bpw: '$2y$04$hEeyobqBCAf06XqrNBUDtufYng8OjbI06MoUDenFxYScBMObQG7De',
  x: '$2y$04$o.AWjqC7zcz/pdmkWPuC..mxvvtZHRcbaCdPJISfUR8TqURQlMCxi',
};

/** The hash of `password` (one of the keys above). */
export function bcryptOf(password: string): string {
  const hash = BCRYPT[password];
  if (hash === undefined) throw new Error(`no fixed bcrypt hash for '${password}'`);
  return hash;
}
