// Types for tabfence.js, the ES module that loads the tabfence runtime.

/** Options of {@link load}. */
export interface LoadOptions {
  /** URL of tabfence.wasm. Served as `application/wasm` it compiles while downloading; otherwise it is buffered first. */
  wasmURL: string | URL;
  /**
   * URL of Go's wasm_exec.js, loaded only when `globalThis.Go` is missing.
   * Default: `wasm_exec.js` next to this module.
   */
  wasmExecURL?: string | URL;
}

/**
 * Starts the runtime once per page (or worker) and resolves to its API.
 * Later and concurrent calls return the same promise and the same instance,
 * even from another copy of this module; their options are ignored. A failed
 * load (network, compile error) is not memoized: the next call tries again.
 */
export function load(options: LoadOptions): Promise<Tabfence>;

/** The API of a loaded runtime. */
export interface Tabfence {
  /** Version of this JavaScript API ("1"). */
  readonly version: string;

  /**
   * Joins the leader election of `scope` at `protocol` among the tabs of this
   * browser (same origin), on the Web Lock {@link Election.lockName}. Never
   * waits: the tab queues for the lock and the callbacks report what happens.
   * The leader keeps leading until it resigns, closes, has its leadership
   * stolen or fenced, or its tab goes away; the next tab in the queue then
   * leads.
   *
   * @throws TypeError for bad options (missing or empty scope, a protocol
   *   that is not a positive integer number, a callback that is not a function).
   * @throws NotSupportedError when Web Locks are unavailable (not a secure context).
   * @throws RuntimeExitedError once the runtime has stopped.
   */
  elect(options: ElectOptions): Election;

  /**
   * The Web Lock name an election of `scope` at `protocol` uses:
   * `"tabfence:<scope>:v<protocol>"`. The protocol version is part of it so a
   * tab left open on an old build never leads the tabs of a new one.
   * @throws TypeError for a bad scope or protocol.
   */
  lockName(scope: string, protocol: number): string;
}

/** Options of {@link Tabfence.elect}. */
export interface ElectOptions {
  /** What the tabs elect a leader for, e.g. a workspace id. Non-empty, at most 200 bytes, no control characters. */
  scope: string;
  /**
   * Version of the protocol the tabs speak, an integer >= 1 (a number, not a
   * string). Bump it on every incompatible deploy: each version elects its own leader.
   */
  protocol: number;
  /** The resource the leader writes to, reported in {@link LeaderContext.resource}; default the lock name. At most 256 bytes. */
  resource?: string;
  /** Who this tab is, reported in {@link LeaderContext.ownerID}; default a random 128-bit hex id. At most 256 bytes. */
  ownerID?: string;
  /**
   * This tab became the leader. Stop leader work when `ctx.signal` aborts.
   * Called in a microtask; an exception it throws is reported like any uncaught error.
   */
  onLeader?(ctx: LeaderContext): void;
  /** This tab is waiting in the queue behind another leader. */
  onFollower?(): void;
  /**
   * This tab's leadership ended (or joining the queue failed: reason
   * "error"). `error` is always given: a LostLeadershipError whose message
   * says what ended and why. Unless the election was closed it rejoins the
   * queue by itself: at once after "resigned" or "stolen", after a short
   * backoff after "fenced" or "error".
   */
  onLost?(reason: LostReason, error: TabfenceError): void;
}

/**
 * Why leadership ended:
 * - `"resigned"`: {@link Election.resign} was called;
 * - `"closed"`: {@link Election.close} was called;
 * - `"stolen"`: another tab called {@link Election.steal};
 * - `"fenced"`: a receiver rejected this leader's token as stale (a newer leader exists);
 * - `"error"`: the lock request failed.
 */
export type LostReason = "resigned" | "closed" | "stolen" | "fenced" | "error";

/** One leadership, handed to {@link ElectOptions.onLeader}. Frozen. */
export interface LeaderContext {
  /**
   * Aborts when this leadership ends, for any reason; `signal.reason` is a
   * named Error (e.g. LockStolenError, LostLeadershipError, InvalidStateError
   * on close). Pass it to fetch and friends.
   */
  readonly signal: AbortSignal;
  /** The Web Lock held, `"tabfence:<scope>:v<protocol>"`. */
  readonly lockName: string;
  /** {@link ElectOptions.resource}, or the lock name when not given. */
  readonly resource: string;
  /** This tab's owner id. */
  readonly ownerID: string;
  /** Fencing token of this leadership (an integer below 2^53; 0 without a fencer). */
  readonly token: number;
  /** Which leadership of this election this is: 1 for the first, then 2, … (a resign and re-lead counts). */
  readonly generation: number;
  /** When the leadership started, in ms since the epoch (comparable with `performance.timeOrigin + performance.now()`). */
  readonly startedAt: number;
}

/** One tab's membership in an election. */
export interface Election {
  readonly scope: string;
  readonly protocol: number;
  /** The Web Lock name, `"tabfence:<scope>:v<protocol>"`. */
  readonly lockName: string;
  /** Whether this tab leads now. False once closed. */
  readonly isLeader: boolean;
  /** The current leadership, or null when this tab does not lead. */
  readonly leadership: LeaderContext | null;
  /**
   * Stops leading: the signal aborts, onLost gets "resigned", the lock is
   * released and this tab rejoins the queue at the back, so a waiting tab
   * leads next (if none waits, this tab leads again with a new generation).
   * Does nothing when not leading.
   * @throws InvalidStateError (rejects) once the election is closed.
   */
  resign(): Promise<void>;
  /**
   * Takes leadership now from a leader that is alive but useless (frozen,
   * signed out). The old leader's onLost gets "stolen" and its signal aborts.
   * Safe only when what the leader writes is fenced. Resolves to the new
   * leadership (the object onLeader also receives); a tab that already leads
   * gets its current one.
   * @throws InvalidStateError (rejects) once the election is closed.
   */
  steal(): Promise<LeaderContext>;
  /**
   * Whether any tab (this one included) holds the election's lock now, from navigator.locks.query().
   * @throws InvalidStateError (rejects) once the election is closed.
   */
  hasLeader(): Promise<boolean>;
  /**
   * Leaves the election for good: releases the lock if held (onLost gets
   * "closed") or withdraws from the queue, so a closed election never leads.
   * Resolves once the lock is released and the last callback was delivered.
   * Idempotent.
   */
  close(): Promise<void>;
}

/** Names of the errors the API rejects or throws with (`error.name`). */
export type TabfenceErrorName =
  | "TypeError" // bad arguments
  | "NotSupportedError" // Web Locks unavailable (not a secure context)
  | "InvalidStateError" // the election is closed
  | "LostLeadershipError" // onLost's error
  | "LockStolenError" // a signal's reason after a steal
  | "StaleOwnerError" // fenced: a newer leader exists
  | "AbortError"
  | "RuntimeExitedError" // the runtime stopped; reload the page
  | "Error";

/** An error from the API: a plain Error whose `name` says what happened. */
export interface TabfenceError extends Error {
  name: TabfenceErrorName | (string & {});
}

/**
 * The error of every call made, or still pending, after the runtime exited
 * or crashed. `cause` is the exit code or the crash. Reload the page.
 */
export class RuntimeExitedError extends Error {
  readonly name: "RuntimeExitedError";
}
