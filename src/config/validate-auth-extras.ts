import { rememberPosition } from './positions.ts';
import type { AllowRules, AuthMethod } from './types.ts';
import { readAllowRules } from './validate-allow.ts';
import type { Field, YamlReader } from './yaml-reader.ts';

export interface PolicyExtras {
  allow?: AllowRules;
  oidc?: { provider: string };
}

/**
 * The parts of an `authorization` object every method shares (`allow`) or oidc alone has
 * (`provider`). The provider name is checked against main.yaml's `oidc_providers` after both files
 * are read (config/validate-oidc checkOidcReferences), at the line recorded here. null: reported.
 */
export function readPolicyExtras(
  r: YamlReader,
  parent: Field,
  fields: Map<string, Field>,
  type: AuthMethod,
): PolicyExtras | null {
  const extras: PolicyExtras = {};
  const providerField = fields.get('provider');
  if (type === 'oidc') {
    if (providerField === undefined || r.isNull(providerField.node)) {
      r.report(parent.keyNode, parent.path, "oidc needs 'provider': a name from main.yaml oidc_providers");
      return null;
    }
    const provider = r.string(providerField);
    if (provider === undefined) return null;
    extras.oidc = { provider };
    rememberPosition(extras.oidc, 'provider', {
      file: r.file,
      ...r.positionOf(r.at(providerField)),
    });
  } else if (providerField) {
    r.report(providerField.keyNode, providerField.path, "'provider' is for type oidc");
  }
  const allowField = fields.get('allow');
  if (allowField && !r.isNull(allowField.node)) {
    const allow = readAllowRules(r, allowField, type);
    if (allow === null) return null;
    extras.allow = allow;
  }
  return extras;
}
