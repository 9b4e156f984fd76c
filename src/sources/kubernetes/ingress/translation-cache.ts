import type { V1Ingress, V1Secret, V1Service } from '@kubernetes/client-node';
import type { ReachesTollgate } from '../../../policy/auth-url-guard.ts';
import { type AgedClaim, byCreation, type HostOwner, hostOwners, sameClaims } from '../ownership.ts';
import { sameItems } from '../same-items.ts';

/**
 * Per-Ingress memory of the translation (docs/benchmark.md#control-plane-at-scale): an edit of one
 * Ingress costs the work of that Ingress, not of every Ingress. An unchanged Ingress (the same
 * object: the watch keeps an object until its resourceVersion changes) whose build reads the same
 * answers from the input as last time gets the very same PathConfig objects back, which is what lets
 * the merge and the compiler skip it. Correctness rests on the recording: a build reads the input
 * only through BuildInput, every read is recorded (key and the object found, or undefined), and a
 * build is reused only when every recorded read gives the same answer now. A read that cannot be
 * replayed (a map walked whole) makes the build never reused. When in doubt, build again.
 */

/** What one Ingress's build may read of the translation's input: nothing else (the type says so). */
export interface BuildInput {
  services: ReadonlyMap<string, V1Service>;
  secrets: ReadonlyMap<string, V1Secret>;
  reachesTollgate?: ReachesTollgate | undefined;
  oidcProviders?: readonly string[] | undefined;
}

/** The answers one build was given, as it asked for them. */
interface Reads {
  /** By key: the object found (undefined: absent), and whether `has` was asked. */
  services: Map<string, V1Service | undefined>;
  secrets: Map<string, V1Secret | undefined>;
  /** `reachesTollgate` read: whether it was given, and each call's answer by `host port`. */
  reaches: { given: boolean; calls: Map<string, { host: string; port: number; answer: boolean }> } | null;
  /** `oidcProviders` read: the names then (undefined: none given). */
  oidcProviders: { names: readonly string[] | undefined } | null;
  /** Something was read that cannot be replayed (a map walked whole): never reuse this build. */
  unreplayable: boolean;
}

/** A map that notes every key asked of it; walking it whole marks the build unreplayable. */
class RecordingMap<V> implements ReadonlyMap<string, V> {
  readonly #inner: ReadonlyMap<string, V>;
  readonly #seen: Map<string, V | undefined>;
  readonly #reads: Reads;

  constructor(inner: ReadonlyMap<string, V>, seen: Map<string, V | undefined>, reads: Reads) {
    this.#inner = inner;
    this.#seen = seen;
    this.#reads = reads;
  }

  get(key: string): V | undefined {
    const value = this.#inner.get(key);
    if (!this.#seen.has(key)) this.#seen.set(key, value);
    return value;
  }

  has(key: string): boolean {
    // Maps of objects hold no undefined value: the object found answers `has` too.
    this.get(key);
    return this.#inner.has(key);
  }

  #whole(): ReadonlyMap<string, V> {
    this.#reads.unreplayable = true;
    return this.#inner;
  }

  get size(): number {
    return this.#whole().size;
  }

  forEach(callback: (value: V, key: string, map: ReadonlyMap<string, V>) => void, thisArg?: unknown): void {
    this.#whole().forEach(callback, thisArg);
  }

  entries(): MapIterator<[string, V]> {
    return this.#whole().entries();
  }

  keys(): MapIterator<string> {
    return this.#whole().keys();
  }

  values(): MapIterator<V> {
    return this.#whole().values();
  }

  [Symbol.iterator](): MapIterator<[string, V]> {
    return this.#whole()[Symbol.iterator]();
  }
}

/** `input` as one build sees it: every read goes through and is written into `reads`. */
function recording(input: BuildInput, reads: Reads): BuildInput {
  const services = new RecordingMap(input.services, reads.services, reads);
  const secrets = new RecordingMap(input.secrets, reads.secrets, reads);
  return {
    services,
    secrets,
    get reachesTollgate(): ReachesTollgate | undefined {
      const given = input.reachesTollgate;
      const noted = reads.reaches ?? { given: given !== undefined, calls: new Map() };
      reads.reaches = noted;
      if (given === undefined) return undefined;
      return (host, port) => {
        const answer = given(host, port);
        const key = `${host} ${port}`;
        if (!noted.calls.has(key)) noted.calls.set(key, { host, port, answer });
        return answer;
      };
    },
    get oidcProviders(): readonly string[] | undefined {
      const names = input.oidcProviders;
      reads.oidcProviders ??= { names: names === undefined ? undefined : [...names] };
      return names;
    },
  };
}

/**
 * True when every read recorded gives the same answer from `input` now. A map given again (the same
 * object: a map is never changed once given, IngressInput) answers as it did, so only the maps that
 * are new since the build was last checked are asked again; `reachesTollgate` is always asked.
 */
function answersSame(entry: Entry<unknown>, input: BuildInput): boolean {
  const reads = entry.reads;
  if (reads.unreplayable) return false;
  if (input.services !== entry.services)
    for (const [key, found] of reads.services) if (input.services.get(key) !== found) return false;
  if (input.secrets !== entry.secrets)
    for (const [key, found] of reads.secrets) if (input.secrets.get(key) !== found) return false;
  if (reads.reaches !== null) {
    const now = input.reachesTollgate;
    if ((now !== undefined) !== reads.reaches.given) return false;
    if (now !== undefined)
      for (const call of reads.reaches.calls.values())
        if (now(call.host, call.port) !== call.answer) return false;
  }
  if (reads.oidcProviders !== null && !sameNames(reads.oidcProviders.names, input.oidcProviders))
    return false;
  entry.services = input.services;
  entry.secrets = input.secrets;
  return true;
}

export function sameNames(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.length === b.length && a.every((name, index) => name === b[index]);
}

/** One build kept: its value, what it read, and the maps it was last checked against. */
interface Entry<T> {
  value: T;
  reads: Reads;
  services: ReadonlyMap<string, V1Service>;
  secrets: ReadonlyMap<string, V1Secret>;
  /** The translation that last asked for it. */
  asked: number;
}

/**
 * One kind of build (main Ingresses, canaries) keyed by the Ingress object. Bounded by the live
 * Ingresses: a translation keeps only the builds it asked for (`begin` … `end`), so an Ingress
 * deleted or replaced by a newer object drops out at the end of the next translation.
 */
export class IngressBuilds<T> {
  readonly #entries = new Map<V1Ingress, Entry<T>>();
  /** The Ingresses whose build asked `reachesTollgate`: its answers may change with the same function. */
  readonly #askingListeners = new Set<V1Ingress>();
  #translation = 0;
  #asked = 0;

  /** Starts a translation. */
  begin(): void {
    this.#translation += 1;
    this.#asked = 0;
  }

  /** Ends a translation: only the builds it asked for are kept (a walk only when some were not). */
  end(): void {
    if (this.#entries.size === this.#asked) return;
    for (const [ingress, entry] of this.#entries) if (entry.asked !== this.#translation) this.forget(ingress);
  }

  /** Drops the build of an Ingress gone (replaced by a newer object, or deleted). */
  forget(ingress: V1Ingress): void {
    this.#entries.delete(ingress);
    this.#askingListeners.delete(ingress);
  }

  /**
   * Keeps the build of `before` for `next`, a newer object of the same Ingress with nothing a build
   * reads changed (sameDesired): Tollgate's own status write replaces every Ingress it serves. True
   * when there was a build to keep.
   */
  carry(before: V1Ingress, next: V1Ingress): boolean {
    const entry = this.#entries.get(before);
    if (entry === undefined || this.#entries.has(next)) return false;
    this.#entries.delete(before);
    this.#entries.set(next, entry);
    if (this.#askingListeners.delete(before)) this.#askingListeners.add(next);
    return true;
  }

  /** The build kept for `ingress`, unchecked (undefined: none). */
  peek(ingress: V1Ingress): T | undefined {
    return this.#entries.get(ingress)?.value;
  }

  /** The Ingresses whose kept build asked `reachesTollgate`. */
  askingListeners(): ReadonlySet<V1Ingress> {
    return this.#askingListeners;
  }

  /** `build(ingress)` from `input`, or the last one when every read it made answers the same now. */
  get(ingress: V1Ingress, input: BuildInput, build: (input: BuildInput) => T): T {
    const known = this.#entries.get(ingress);
    if (known !== undefined && known.asked === this.#translation) return known.value;
    if (known !== undefined && answersSame(known, input)) {
      this.#ask(known);
      return known.value;
    }
    const reads: Reads = {
      services: new Map(),
      secrets: new Map(),
      reaches: null,
      oidcProviders: null,
      unreplayable: false,
    };
    const value = build(recording(input, reads));
    const entry: Entry<T> = { value, reads, services: input.services, secrets: input.secrets, asked: 0 };
    this.#entries.set(ingress, entry);
    if (reads.reaches !== null) this.#askingListeners.add(ingress);
    else this.#askingListeners.delete(ingress);
    this.#ask(entry);
    return value;
  }

  #ask(entry: Entry<T>): void {
    entry.asked = this.#translation;
    this.#asked += 1;
  }

  /** Builds held (tests: bounded by the live Ingresses). */
  get size(): number {
    return this.#entries.size;
  }
}
/**
 * The host owners (ownership.ts hostOwners over the claims oldest first), computed again only when
 * upstreams.yaml's hosts or a claim changed: equal claims (the same namespace, object, age and
 * hosts) give equal owners, so an edit that keeps every Ingress's hosts sorts nothing.
 */
export class OwnersMemo {
  #fileHosts: readonly string[] = [];
  #claims: readonly AgedClaim[] = [];
  #others: readonly AgedClaim[] = [];
  #owners: Map<string, HostOwner> | null = null;

  /** The owners of the hosts upstreams.yaml names and the Ingresses' and the other source's claims name. */
  owners(
    fileHosts: readonly string[],
    claims: readonly AgedClaim[],
    others: readonly AgedClaim[],
  ): Map<string, HostOwner> {
    if (
      this.#owners !== null &&
      sameItems(fileHosts, this.#fileHosts) &&
      sameClaims(claims, this.#claims) &&
      sameClaims(others, this.#others)
    )
      return this.#owners;
    // Ingresses before routes, each in its own age order; then oldest first (ownership.ts).
    this.#owners = hostOwners(fileHosts, byCreation([...claims, ...others]));
    // Copies: the caller's lists may be handed on (a translation's claims) or changed.
    this.#fileHosts = [...fileHosts];
    this.#claims = [...claims];
    this.#others = [...others];
    return this.#owners;
  }
}

/**
 * True when `next` is `before` with nothing a translation reads of it changed: the same Ingress (uid,
 * namespace, name), the same `metadata.generation` (which the API server bumps on every change of the
 * spec, as the watches rely on: resource-watch.ts) and the same annotations. What is left to differ
 * is status (Tollgate's own status write), labels, managedFields and the resourceVersion. Without a
 * uid or a generation, never.
 */
export function sameDesired(before: V1Ingress, next: V1Ingress): boolean {
  const a = before.metadata;
  const b = next.metadata;
  return (
    a !== undefined &&
    b !== undefined &&
    a.uid !== undefined &&
    a.uid === b.uid &&
    a.generation !== undefined &&
    a.generation !== null &&
    a.generation === b.generation &&
    a.namespace === b.namespace &&
    a.name === b.name &&
    sameAnnotations(a.annotations, b.annotations)
  );
}

function sameAnnotations(
  a: Readonly<Record<string, string>> | undefined,
  b: Readonly<Record<string, string>> | undefined,
): boolean {
  if (a === b) return true;
  const keys = Object.keys(a ?? {});
  return (
    keys.length === Object.keys(b ?? {}).length &&
    keys.every((key) => b !== undefined && Object.hasOwn(b, key) && b[key] === a?.[key])
  );
}
