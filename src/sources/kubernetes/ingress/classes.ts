import type { V1Ingress, V1IngressClass } from '@kubernetes/client-node';

/**
 * Which Ingresses are Tollgate's to serve (docs/ingress.md#which-ingresses): the IngressClasses whose
 * controller is Tollgate's, main.yaml's class name, and the class an Ingress names.
 */

/** `spec.controller` of the IngressClasses Tollgate serves (docs/ingress.md). */
export const INGRESS_CONTROLLER = 'tollgate.io/ingress-controller';
export const DEFAULT_CLASS_ANNOTATION = 'ingressclass.kubernetes.io/is-default-class';
/** The pre-IngressClass way of naming a class, still honoured by every controller. */
export const LEGACY_CLASS_ANNOTATION = 'kubernetes.io/ingress.class';

/** The IngressClass names Tollgate serves, and whether it also takes Ingresses naming no class. */
export interface OurClasses {
  names: Set<string>;
  takesUnclassed: boolean;
}

/** Ours: main.yaml's `kubernetes.ingress_class` (`className`), and each IngressClass of our controller. */
export function ourClasses(input: { className: string; classes: readonly V1IngressClass[] }): OurClasses {
  const names = new Set<string>();
  let takesUnclassed = false;
  const configured = input.classes.find((item) => item.metadata?.name === input.className);
  // The configured name is ours unless an IngressClass of that name belongs to another controller.
  if (configured === undefined || configured.spec?.controller === INGRESS_CONTROLLER)
    names.add(input.className);
  for (const item of input.classes) {
    if (item.spec?.controller !== INGRESS_CONTROLLER || !item.metadata?.name) continue;
    names.add(item.metadata.name);
    if (item.metadata.annotations?.[DEFAULT_CLASS_ANNOTATION] === 'true') takesUnclassed = true;
  }
  return { names, takesUnclassed };
}

/** True when this Ingress is Tollgate's to serve. */
export function isOurs(ingress: V1Ingress, classes: OurClasses): boolean {
  const named = ingress.spec?.ingressClassName ?? ingress.metadata?.annotations?.[LEGACY_CLASS_ANNOTATION];
  return named === undefined ? classes.takesUnclassed : classes.names.has(named);
}

/** The same classes: Ingresses are ours or not alike. */
export function sameClasses(a: OurClasses, b: OurClasses): boolean {
  return (
    a.takesUnclassed === b.takesUnclassed &&
    a.names.size === b.names.size &&
    [...a.names].every((name) => b.names.has(name))
  );
}
