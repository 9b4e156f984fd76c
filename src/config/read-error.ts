const READ_ERRORS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EISDIR: 'it is a directory',
  ENOTDIR: 'a parent is not a directory',
  ELOOP: 'too many symbolic links',
};

/** Why a file named by the config could not be read, in words rather than an errno code. */
export function readErrorReason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code ?? '';
  return READ_ERRORS[code] ?? (error as Error).message;
}
