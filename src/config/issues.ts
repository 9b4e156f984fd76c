import type { ConfigIssue } from './types.ts';

/**
 * `upstreams.yaml:12:5: upstreams.api.example.com.paths./v1.servers[2]: <message>`, the shape editors
 * and CI logs turn into clickable links. An issue without a position (line 0, e.g. an unreadable
 * file) whose message already names the file is printed as is, so the path is not repeated.
 */
export function formatIssue(issue: ConfigIssue): string {
  const where = issue.line > 0 ? `${issue.file}:${issue.line}:${issue.column}` : issue.file;
  const what = issue.path ? `${issue.path}: ${issue.message}` : issue.message;
  if (issue.line === 0 && !issue.path && issue.message.includes(issue.file)) return issue.message;
  return `${where}: ${what}`;
}

/** Thrown by callers that prefer exceptions; carries every issue, not just the first. */
export class ConfigError extends Error {
  readonly issues: ConfigIssue[];

  constructor(issues: ConfigIssue[]) {
    super(issues.map(formatIssue).join('\n'));
    this.name = 'ConfigError';
    this.issues = issues;
  }
}
