// Types for tabfence.js, the ES module that loads the tabfence runtime.

/** Options of {@link load}. */
export interface LoadOptions {
  /**
   * URL of the runtime (tabfence.wasm, or tabfence-core.wasm without the
   * outbox). Served as `application/wasm` it compiles while downloading;
   * otherwise it is buffered first. Default: `tabfence.wasm` next to this
   * module, written `new URL("./tabfence.wasm", import.meta.url)`, which Vite
   * rewrites; with esbuild, import `tabfence/wasm` (loader `file`) and pass it.
   */
  wasmURL?: string | URL;
  /**
   * URL of Go's wasm_exec.js, loaded only when `globalThis.Go` is missing.
   * Default: `wasm_exec.js` next to this module (a bundler includes it).
   */
  wasmExecURL?: string | URL;
  /**
   * How the module is fetched (default: the global fetch), for a worker
   * that answers from its Cache API cache (tabfence-sw.js does). The
   * Response's Content-Type decides streaming compilation as above.
   */
  fetch?: (url: string | URL) => Promise<Response>;
}

/**
 * Starts the runtime once per page (or worker) and resolves to its API.
 * Later and concurrent calls return the same promise and the same instance,
 * even from another copy of this module; their options are ignored. A failed
 * load (network, compile error) is not memoized, nor a runtime that has
 * since exited or crashed (RuntimeExitedError): the next call starts a new
 * one (a Service Worker lives on; a page usually reloads).
 *
 * Content-Security-Policy: WebAssembly needs `'wasm-unsafe-eval'` in
 * `script-src`; `'unsafe-eval'` is not needed. Without it the runtime's two
 * JavaScript helpers made with the Function constructor (the outbox's packed
 * record reader, the tracker of open transactions) are refused (reported as
 * CSP violations) and it takes its Go paths: the same results, a little
 * slower, and a tab frozen with an open transaction keeps it open until it
 * resumes or is discarded, blocking the other tabs' transactions on the same
 * stores.
 *
 * Page Lifecycle: when the browser freezes this page, the runtime aborts its
 * open IndexedDB transactions (a fenced apply, a token allocation, an outbox
 * flush step; not an outbox enqueue), so a frozen leader never blocks the tab
 * that steals its leadership. A call in flight then rejects with an
 * AbortError ("the page was frozen…") and wrote nothing; fence and election
 * calls made while frozen wait for the resume.
 */
export function load(options?: LoadOptions): Promise<Tabfence>;

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
  elect(options: FencedElectOptions): Election<FencedLeaderContext>;
  elect(options: UnfencedElectOptions): Election<LeaderContext>;
  /** `fenced` known only at run time: the context has apply/post when {@link Election.fenced}. */
  elect(options: ElectOptions): Election<LeaderContext | FencedLeaderContext>;

  /**
   * The Web Lock name an election of `scope` at `protocol` uses:
   * `"tabfence:<scope>:v<protocol>"`. The protocol version is part of it so a
   * tab left open on an old build never leads the tabs of a new one.
   * @throws TypeError for a bad scope or protocol.
   */
  lockName(scope: string, protocol: number): string;

  /**
   * The receiver fence of `resource` in the runtime's IndexedDB database
   * (see {@link StorageOptions}): token allocation, fenced apply,
   * compare-and-swap, and the page's local epoch guard. Never waits: the
   * database opens on first use. Tokens of `fence(r)` and of a fenced
   * election whose resource is `r` (same database) share one sequence.
   * @throws TypeError for a bad resource (empty, over 200 bytes) or options,
   *   or for stores not declared before the database was opened in this page.
   */
  fence(resource: string, options?: StorageOptions): Fence;

  /**
   * Joins the fenced BroadcastChannel `name` — use an election's
   * {@link Election.lockName} (or {@link Election.channel}) so tabs of
   * another protocol version never share it. Only this page's current
   * fenced leader of that lock name can {@link Channel.post}.
   */
  channel(name: string, options?: ChannelOptions): Channel;

  /**
   * Deletes the runtime's database (default `"tabfence"`), e.g. on
   * sign-out: every tab's connection closes itself at once (so the delete is
   * never blocked by a tabfence tab) and their fenced elections end with
   * onLost("deleted"). Resolves once deleted. Plain
   * `indexedDB.deleteDatabase` has the same effect.
   */
  deleteDatabase(name?: string): Promise<void>;
}

/**
 * Options of {@link Tabfence.elect}. A fenced election's callbacks get a
 * {@link FencedLeaderContext}: see {@link FencedElectOptions}.
 */
export interface ElectOptions<C extends LeaderContext = LeaderContext> {
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
   * Whether leadership is fenced: a fencing token is allocated in IndexedDB
   * (the {@link StorageOptions.database}) after the lock is granted and
   * before onLeader, and `ctx.token` carries it (> 0, strictly increasing
   * across all tabs of the origin). Default: true when `resource` is given,
   * false otherwise (token 0, no database opened). A fenced election's
   * leaders get a {@link FencedLeaderContext} (`ctx.apply`, `ctx.post`), and it is closed with onLost("deleted" or
   * "upgraded") when another tab deletes or upgrades its database.
   */
  fenced?: boolean;
  /** Database of a fenced election; see {@link StorageOptions}. */
  database?: string;
  /** App stores a fenced election's `ctx.apply` writes; see {@link StorageOptions}. */
  stores?: string[];
  /** Schema version of the database; see {@link StorageOptions}. */
  version?: number;
  /**
   * The watchdog (off by default): a leader that is frozen or hung keeps its
   * Web Lock until someone steals it, so with `stallAfter` the leader posts a
   * heartbeat — its token and a timestamp, never data — every 500 ms on the
   * BroadcastChannel `lockName + "#heartbeat"`, and a follower whose page is
   * visible and not frozen that hears none for `stallAfter` ms (plus up to
   * 250 ms of jitter, so followers do not all steal at once) calls
   * {@link Election.steal}. Fenced elections only (a TypeError otherwise):
   * the resumed old leader's writes are rejected as stale.
   *
   * `true` means 5000; a number is 3000 to 3600000 ms; 0, false or absent:
   * no watchdog. Hidden tabs never steal. A hidden leader's heartbeats
   * still come about once a second (Chromium wakes a hidden page's timers
   * once a second; each heartbeat timer is set outside a timer chain, so
   * the one-a-minute throttling of chained timers in long-hidden pages does
   * not apply): 3000 tolerates one missed wake-up, 5000 three. A hidden
   * leader whose own timers use more than Chromium's 1 % CPU budget for
   * hidden pages can be late by more: give it a longer `stallAfter`. Give
   * every tab of an election the same value, and bump `protocol` when you
   * turn it on: a leader of a build without it sends no heartbeats, so a
   * visible tab of the new build would steal from a healthy old leader.
   */
  stallAfter?: number | boolean;
  /**
   * This tab became the leader. Stop leader work when `ctx.signal` aborts.
   * Called in a microtask; an exception it throws is reported like any uncaught error.
   */
  onLeader?(ctx: C): void;
  /** This tab is waiting in the queue behind another leader. */
  onFollower?(): void;
  /**
   * This tab's leadership ended (or joining the queue failed: reason
   * "error"). `error` is always given: a LostLeadershipError whose message
   * says what ended and why. Unless the election was closed it rejoins the
   * queue by itself: at once after "resigned" or "stolen", after a short
   * backoff after "fenced" or "error".
   *
   * "deleted", "upgraded" and "storage-closed" (fenced elections only) are
   * reported to followers too: the database was deleted by another tab
   * (sign-out), opened at a newer version by a newer build, or closed by
   * the browser. The election is then CLOSED — a leader released its lock
   * rather than lead on from memory — and does not rejoin: reload your
   * state (or the page) and call elect() again; a new election opens a
   * fresh database.
   */
  onLost?(reason: LostReason, error: TabfenceError): void;
}

/**
 * The options of a fenced election: a `resource` without `fenced: false`, or
 * `fenced: true`. Its leader contexts always have `apply` and `post`.
 */
export type FencedElectOptions = ElectOptions<FencedLeaderContext> & ({ resource: string; fenced?: true } | { fenced: true });

/** The options of an election without a fence: no `resource`, or `fenced: false`. */
export type UnfencedElectOptions = ElectOptions<LeaderContext> & { fenced?: false };

/**
 * Why leadership ended:
 * - `"resigned"`: {@link Election.resign} was called;
 * - `"closed"`: {@link Election.close} was called;
 * - `"stolen"`: another tab called {@link Election.steal} (or its watchdog did: {@link ElectOptions.stallAfter});
 * - `"fenced"`: a receiver rejected this leader's token as stale (a newer leader exists):
 *   a fenced apply or cas returned "stale", or a genuinely newer token (checked against the
 *   allocation record in IndexedDB) was heard on a channel;
 * - `"error"`: the lock request or the token allocation failed;
 * - `"deleted"` / `"upgraded"` / `"storage-closed"`: the fenced election's database went away
 *   (see {@link ElectOptions.onLost}); the election is closed.
 */
export type LostReason = "resigned" | "closed" | "stolen" | "fenced" | "error" | "deleted" | "upgraded" | "storage-closed";

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

/** The context of a fenced election's leadership: what {@link LeaderContext} has, and the fence's calls. Frozen. */
export interface FencedLeaderContext extends LeaderContext {
  /** The database the token came from. */
  readonly database: string;
  /**
   * {@link Fence.apply} on `resource` with this
   * leadership's token (`op.token` may be left out; another token is a
   * TypeError). A "stale" result makes this leadership step down: the
   * signal aborts, the lock is released, onLost gets "fenced". It still
   * works after the leadership ended: the fence decides, and says "stale"
   * as soon as a newer token is allocated (a steal), before its owner writes.
   */
  apply(op: Omit<FencedOp, "token"> & { token?: number }, writes?: Write[]): Promise<ApplyResult>;
  /**
   * Posts on the election's channel (its lock name)
   * with this leadership's token and the next sequence of this leadership.
   * It is delivered to every {@link Channel} of that name in every tab,
   * this page's own `election.channel()` subscriptions included (ctx.post
   * speaks through the election's own channel object, not through yours),
   * so one subscriber serves the leader's page and the followers alike.
   * Rejects with NotLeaderError once the leadership is over.
   */
  post(kind: string, payload?: unknown): Promise<PostReceipt>;
}

/** One tab's membership in an election; `C` is what its leaderships look like. */
export interface Election<C extends LeaderContext = LeaderContext> {
  readonly scope: string;
  readonly protocol: number;
  /** The Web Lock name, `"tabfence:<scope>:v<protocol>"`. */
  readonly lockName: string;
  /** Whether this tab leads now. False once closed. */
  readonly isLeader: boolean;
  /** The current leadership, or null when this tab does not lead. */
  readonly leadership: C | null;
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
  steal(): Promise<C>;
  /**
   * Whether any tab (this one included) holds the election's lock now, from navigator.locks.query().
   * @throws InvalidStateError (rejects) once the election is closed.
   */
  hasLeader(): Promise<boolean>;
  /** Whether this election is fenced ({@link ElectOptions.fenced}). */
  readonly fenced: boolean;
  /** The watchdog's {@link ElectOptions.stallAfter} in ms; 0 without a watchdog. */
  readonly stallAfter: number;
  /**
   * The fence of this election's resource in its database.
   * @throws TypeError when the election is not fenced.
   */
  fence(): Fence;
  /** `tf.channel(lockName, options)`, bound to this election: post speaks for its current leadership. */
  channel(options?: ChannelOptions): Channel;
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
  | "NotLeaderError" // post() without a current fenced leadership
  | "DatabaseDeletedError" // the fence's database was deleted by another tab
  | "DatabaseUpgradedError" // the fence's database was upgraded by a newer build
  | "ConstraintError" // an "add" write hit an existing key: the whole apply was rolled back
  | "DataError" // a write's key is not a valid IndexedDB key
  | "NotFoundError" // a write names a store that was not declared
  | "AbortError"
  | "QuotaExceededError" // the disk is full: nothing was written
  | "NoSessionError" // outbox: no user logged in
  | "UnknownOperationError" // outbox: an operation type without a policy
  | "PausedError" // outbox: paused
  | "AuthRequiredError" // outbox: the receiver answered 401
  | "SessionChangedError" // outbox: another tab logged in or out during the flush
  | "SessionMismatchError" // outbox: the receiver authenticated another user than the records'
  | "NetworkError" // outbox: offline, or no fencing token
  | "MutationRejectedError" // connection: the server refused the mutation (see its problem)
  | "MutationNotStoredError" // connection: mutate() could not store the mutation (a frozen page, storage closed): nothing was saved or sent
  | "RuntimeExitedError" // the runtime stopped; reload the page
  // The browser's, passed through from the API underneath:
  | "NotAllowedError" // e.g. storage access denied
  | "DataCloneError" // a value that cannot be structured-cloned
  | "TransactionInactiveError"
  | "ReadOnlyError"
  | "VersionError" // the database is at a newer version than asked for
  | "TimeoutError"
  | "SecurityError" // e.g. IndexedDB refused in this context
  | "UnknownError" // the browser's storage failed
  | "RangeError"
  | "Error";

/** An error from the API: a plain Error whose `name` says what happened. */
export interface TabfenceError extends Error {
  name: TabfenceErrorName;
}

/**
 * The error of every call made, or still pending, after the runtime exited
 * or crashed. `cause` is the exit code or the crash. Reload the page.
 */
export class RuntimeExitedError extends Error {
  readonly name: "RuntimeExitedError";
}

// ---- Fencing ----

/**
 * Where fenced state lives. The runtime keeps ONE connection per database
 * name per page, shared by every fence and fenced election naming it.
 *
 * App stores are declared, not created by callbacks: list every store on
 * the first `fence()` or fenced `elect()` of the page (declarations
 * accumulate until the database opens; a store declared after that is a
 * TypeError). To add a store in a new build, bump `version`: tabs of the
 * old build then get onLost("upgraded") and must reload. Stores use
 * out-of-line keys (every write names its key).
 */
export interface StorageOptions {
  /** IndexedDB database name; default `"tabfence"`. */
  database?: string;
  /** App object stores, e.g. `["notes"]`. Names starting with `tf_` are reserved. */
  stores?: string[];
  /** Schema version, an integer >= 1; default 1. All calls of a page must agree. */
  version?: number;
}

/** An operation offered to a receiver fence. */
export interface FencedOp {
  /** The sender's fencing token (its leadership's `ctx.token`), 1..2^53-1. */
  token: number;
  /** Identifies the operation across retries and leaders: applied at most once (1..255 bytes, no control characters). */
  operationID: string;
  /** Optional position in the sender's stream under `token` (1, 2, 3…): a replayed position is a duplicate even with a new ID. */
  sequence?: number;
}

/**
 * One declarative write, issued inside the fence's transaction.
 *
 * Why a list and not a callback: an IndexedDB transaction commits or dies
 * as soon as anything other than an IndexedDB request is awaited — a
 * promise, a timer, fetch, a message — and a JavaScript callback called
 * from the Go runtime is exactly such a hop. With a list, every request is
 * issued inside the one transaction that also checks and advances the
 * fence, so the writes and the new highest token commit together or not
 * at all. Compute what to write first, then apply.
 */
export interface Write {
  /** A store declared in {@link StorageOptions.stores}. */
  store: string;
  /** put: insert or replace; add: insert, and fail the WHOLE apply if the key exists; delete: remove the key. */
  op: "put" | "add" | "delete";
  /** A valid IndexedDB key (string, number, Date, array…). Required. */
  key: IDBValidKey;
  /** Any structured-cloneable value; required for put and add. */
  value?: unknown;
}

/**
 * - `"accepted"`: fresh; the writes and the advanced fence committed together;
 * - `"duplicate"`: this operation ID (or this token's sequence) was already applied: nothing written;
 * - `"stale"`: the token is older than the highest accepted for the resource, or than the last
 *   token allocated for it (in the same database, read in the apply's own transaction): a newer
 *   leader exists from the moment its token is allocated, whether or not it has written yet.
 *   Nothing written; this page's leaderships of the resource with that token or older step down
 *   ("fenced"), and the page's guard learns the newer token. A token above every allocated one
 *   (e.g. one a server issued) is judged by the accepted tokens alone.
 */
export type ApplyResult = "accepted" | "duplicate" | "stale";

/** The receiver fence of one resource. */
export interface Fence {
  readonly resource: string;
  readonly database: string;
  /**
   * Allocates the resource's next token: one readwrite transaction, unique
   * and strictly increasing across every tab of the origin. A fenced
   * election does this for you when it becomes leader.
   */
  allocate(): Promise<number>;
  /**
   * Offers `op` to the fence and, only if accepted, issues `writes` — all in
   * one readwrite transaction. The invariant: a side effect from a token
   * older than the highest accepted or allocated for the resource is never
   * applied.
   * Rejects (with nothing written) when a write fails: ConstraintError,
   * DataError, NotFoundError, DatabaseDeletedError…
   */
  apply(op: FencedOp, writes?: Write[]): Promise<ApplyResult>;
  /**
   * "Write if the token is fresh": puts `value` at `key` of `store` only if
   * `token` is not older than the highest token that wrote that key, nor
   * than the last token allocated for this fence's resource (an equal token
   * may write again); resolves to whether it wrote. A false makes this
   * page's leaderships of the resource with that token step down.
   */
  cas(store: string, key: string, token: number, value: unknown): Promise<boolean>;
  /** The highest token the fence accepted (0 when none). */
  highest(): Promise<number>;
  /** The page's local epoch guard of this resource (the same object every call). */
  guard(): EpochGuard;
}

/**
 * A local epoch guard for results that only touch memory or UI (a late
 * fetch, a worker result). Shared by the page per resource, and advanced
 * automatically to the highest token this page knows of: its leaderships,
 * allocations and accepted applies, fresh channel messages, and the newest
 * allocated or accepted token that a stale apply or cas found. It never goes
 * back. It is memory, not storage: a token allocated in another tab is not
 * known here until one of those brings it, so right after a steal the old
 * leader's guard may still call its token current (its `ctx.signal` has
 * aborted, and the fence already rejects its writes). It does not replace
 * the fence for stored state. Caveat: channel messages advance it
 * unverified, so a forged token on the channel can make it report "stale".
 */
export interface EpochGuard {
  readonly resource: string;
  /** The highest token seen for the resource. */
  readonly current: number;
  /** Records `token` if higher; returns the current token. */
  advance(token: number): number;
  /** Whether `token` is the current one: its result may be applied. */
  isCurrent(token: number): boolean;
  /** Whether a newer token than `token` has been seen: drop its result. */
  isStale(token: number): boolean;
}

/** Options of {@link Tabfence.channel}. */
export interface ChannelOptions {
  /**
   * Subscribe-before-load: hold every message that arrives until
   * {@link Channel.replay}. Open the channel, subscribe, load your state
   * from IndexedDB, optionally {@link Channel.seed} the loaded position,
   * then replay: nothing that arrived during the load is lost.
   */
  buffer?: boolean;
}

/** What {@link Channel.post} resolves to. */
export interface PostReceipt {
  readonly id: string;
  readonly token: number;
  readonly seq: number;
}

/** A fresh message, as delivered to subscribers. */
export interface ChannelMessage {
  readonly id: string;
  readonly kind: string;
  readonly payload: unknown;
  /** The sender's fencing token. */
  readonly token: number;
  /** The sender's sequence under `token`: 1, 2, 3… */
  readonly seq: number;
  readonly resource: string;
  /** The sender's owner id (unverified, like everything on the channel). */
  readonly owner: string;
  readonly sentAt: number;
  /**
   * Messages were missed before this one (a sequence jumped, or a new
   * token started past 1). Do not patch the hole: reload the resource from
   * storage. The leader writes, then announces, so storage holds at least
   * what was announced.
   *
   * A channel that has seen nothing and was not {@link Channel.seed}ed
   * reports no gap on its first message, whatever its sequence (seq 5 is
   * `gap: false`): it assumes the reader loaded from storage after
   * subscribing. So subscribe, load, then seed the position you loaded;
   * a first message past it is then a gap.
   */
  readonly gap: boolean;
}

/** Why a channel dropped a message. */
export type DropReason =
  | "stale_token" // an older token than the highest seen for the resource: a stale leader
  | "duplicate_seq" // a sequence already seen under the current token
  | "duplicate_id" // a message id already seen
  | "malformed" // not an envelope: wrong types, missing fields, out-of-range numbers
  | "version" // tabfence, but another protocol version
  | "oversized" // a field or the payload (string, ArrayBuffer, Blob) over the limits, or too many resources
  | "foreign_protocol"; // not a tabfence message at all

/** A snapshot of a channel's counters. */
export interface ChannelStats {
  readonly received: number;
  readonly delivered: number;
  readonly gaps: number;
  readonly dropped: Readonly<Record<DropReason, number>>;
  readonly droppedTotal: number;
}

/**
 * A fenced BroadcastChannel.
 *
 * Anything on a BroadcastChannel is untrusted: any script of the origin can
 * post anything. Garbage, oversized and other-version messages are dropped
 * and counted, never a crash. A FORGED envelope with a higher token than
 * any real one is the real risk: receivers cannot tell it from a newer
 * leader's without storage, so followers deliver it and then drop the real
 * leader's messages as stale until a newer leadership — a denial of
 * service. What it cannot do: it cannot depose the leader (a leader checks
 * a newer token against the allocation record in IndexedDB before stepping
 * down, and ignores a forged one with a console warning), and it cannot
 * pass a fence (applies check the stored fence, not the channel). A
 * receiver judges a message by the tokens it has seen on the channel, so a
 * deposed leader's message posted before the new leader's first one (a
 * frozen tab that resumes mid-post) is still delivered: keep state behind
 * the fence and treat messages as hints to reload. A script
 * that can run on your origin can also write IndexedDB directly: fencing
 * protects against stale tabs, not against code you serve.
 */
export interface Channel {
  readonly name: string;
  /**
   * Posts `kind`/`payload` (structured-cloneable) under this page's current
   * fenced leadership of the channel's lock name, with its token and the
   * next sequence of that leadership. Not delivered to the posting channel
   * object itself (BroadcastChannel's rule); the page's other Channel objects
   * of the same name, and every other tab's, receive it.
   * @throws NotLeaderError (rejects) when this page does not lead.
   */
  post(kind: string, payload?: unknown): Promise<PostReceipt>;
  /** Calls `fn` for every fresh message, in order, in a microtask. Returns the unsubscribe function. */
  subscribe(fn: (message: ChannelMessage) => void): () => void;
  /** Drop counters per reason. */
  stats(): ChannelStats;
  /** Buffer mode: deliver what was held (cursor rules apply in arrival order), then go live. */
  replay(): void;
  /**
   * Tells the receiver the position loaded from storage (the token and
   * sequence your stored state reflects), so older messages are dropped and
   * a first message past it reports a gap. Without it the first message
   * never reports one (see {@link ChannelMessage.gap}).
   */
  seed(resource: string, token: number, seq?: number): void;
  /** Leaves the channel. Idempotent. */
  close(): void;
}

// ---- tf.outbox: the durable, fenced outbox ----

export interface Tabfence {
  /**
   * Opens the durable outbox `name` at `protocol` shared by the tabs of this
   * browser: an IndexedDB queue (the source of truth), one flush owner at a
   * time (the Web Lock `"tabfence:outbox-<name>:v<protocol>"` with
   * ifAvailable; an IndexedDB lease where Web Locks are missing), server
   * fencing tokens from `POST /fence/outbox:<name>:<user>` (at protocol 1;
   * `outbox-v<protocol>:<name>:<user>` at others), and a frozen-owner watchdog. Flushes
   * are triggered by `online`, the tab becoming visible, `focus`, enqueues in
   * any tab, the timer of the next due record, and {@link Outbox.flush}; with
   * every tab closed, by the origin's Service Worker on Background Sync where
   * it runs tabfence-sw.js (see {@link OutboxOptions.backgroundSync}).
   * @throws TypeError (rejection) for bad options.
   */
  outbox<Ops extends OperationMap = OperationMap>(options: OutboxOptions<Ops>): Promise<Outbox<Ops>>;
}

/**
 * The app's operations: operation type -> payload type, e.g.
 * `{ "note.update": Note; "note.delete": { id: string } }`. Given to
 * {@link Tabfence.outbox} (or inferred from its `policies`), it checks every
 * enqueue: an operation type without a policy, or a payload of another
 * shape, does not compile.
 */
export type OperationMap = { [operationType: string]: unknown };

/** How an enqueue treats earlier waiting records with the same operationKey. */
export type Dedupe = "append" | "replace-latest" | "merge" | "drop-if-exists";

export interface OutboxPolicy<P = unknown> {
  /** Dedupe is domain logic: configured per operation type, never guessed. Distinct business facts use "append". */
  dedupe: Dedupe;
  /**
   * For "merge": (older, newer) payloads -> merged payload; synchronous. Default: Object.assign({}, older, newer).
   * Both arrive as JSON.parse of what was stored and the result is stored with JSON.stringify: merge is for
   * payloads that are JSON objects (a Date arrives as its string; a string or bytes payload cannot be merged).
   */
  merge?(older: P, newer: P): P;
  /** Overrides OutboxOptions.maxAttempts for this operation type. */
  maxAttempts?: number;
  /** Overrides OutboxOptions.endpoint for this operation type. */
  endpoint?: string;
}

export interface OutboxOptions<Ops extends OperationMap = OperationMap> {
  /** Queue scope: with the protocol, names the IndexedDB database, the Web Lock and the channel. */
  name: string;
  /**
   * The queue's compatibility with the server, an integer >= 1 (default 1).
   * Tabs of different protocols share nothing: database, lock, channel,
   * lease and fencing resource carry it, so a tab left open from before a
   * deploy keeps its own queue and never leads the new one. Protocol 1 keeps
   * the names of builds without protocols (database `"tabfence-outbox:<name>"`),
   * so an existing queue drains after an upgrade; any other protocol starts
   * an empty queue (database `"tabfence:outbox-<name>:v<protocol>"`). Records
   * left in a protocol's queue are sent only by tabs of that protocol: bump
   * it when the server no longer accepts the old requests, and use
   * schemaVersion and migrations when it does.
   */
  protocol?: number;
  /**
   * The payload schema of the records this build enqueues, an integer >= 1
   * (default 1). A build sends records of its own schema, migrates older
   * ones (migrations) and never sends, changes nor deletes the rest: newer
   * ones, older ones without a migration path, and those whose migration
   * threw; they stay queued for a build that can send them, counted in
   * {@link OutboxStatus.unsupported} and listed by {@link Outbox.unsupported}.
   */
  schemaVersion?: number;
  /**
   * `migrations[v](payload)` upgrades a payload of schema v to v + 1, run in
   * order at every send (never stored: the record keeps its schema and
   * payload). It gets the parsed JSON payload (the string when it is not
   * JSON, a Uint8Array when the payload is not UTF-8 text) and returns the
   * new payload (a string or bytes as is, anything else JSON.stringify'd);
   * synchronous, pure. A migration that throws, or returns a promise (an
   * async function), leaves its record unsent and unsupported in this tab
   * (error code "schema_unsupported"); a tab loaded later tries it again.
   */
  migrations?: Record<number, (payload: unknown) => unknown>;
  /** Where records are POSTed (path or URL), e.g. "/api/notes". */
  endpoint: string;
  /**
   * The receiver's batch route (e.g. "/api/notes/batch", a receiver's
   * HandleBatch): due records are sent up to `max` (default 100, at most
   * 1000) per request, in the batch format, instead of one POST each. The
   * receiver applies each mutation as its single POST would be (same
   * fingerprint: the record's own endpoint travels with it) and answers a
   * result per mutation, which the outbox applies to that record alone:
   * records keep their own idempotency keys, attempts, backoff and dead
   * letters, so a batch resent after a lost answer is replayed mutation by
   * mutation. An entity's records stay in order and in one request at a
   * time. A server that does not speak the format (404, 405, 501, a
   * malformed answer) makes this outbox fall back to one POST per record;
   * a 413 halves the page. Without it records go one by one. A request
   * holds at most `maxBytes` of mutations (default 512 KiB, under a
   * receiver's default 1 MiB body limit); a bigger record is sent alone. A
   * record is batched only when its own request would go to the batch
   * endpoint's origin (both paths, or absolute URLs of one origin), and
   * when its payload travels in the format byte for byte (JSON, or UTF-8
   * text); other records are sent alone, in their entity's order.
   */
  batch?: { endpoint: string; max?: number; maxBytes?: number };
  /**
   * The logged-in user: opening with it is a {@link Outbox.login} (for every
   * tab of the queue). Without it the tab takes the user the queue is logged
   * in as, if any.
   */
  user?: string;
  /**
   * Credentials added at send time, never stored: an object, or a function
   * of the record's user returning one or a Promise of one (awaited within
   * sendTimeoutMs; a rejection fails that send as a network error does, to
   * be retried). Also sent with the fencing-token requests
   * (`POST <fencePath><resource>`), which a receiver authenticates too.
   */
  headers?: Record<string, string> | ((user: string) => Record<string, string> | Promise<Record<string, string>>);
  /** Operation type -> policy, one for each operation of `Ops`. An operation type without a policy is refused (UnknownOperationError). */
  policies: { [K in keyof Ops]: OutboxPolicy<Ops[K]> };
  /** Charged attempts before a record becomes a dead letter (default 10). */
  maxAttempts?: number;
  /** Exponential backoff with full jitter, in ms (default base 1000, cap 300000); Retry-After is honoured as a floor. */
  backoff?: { base?: number; cap?: number };
  /** Where fencing tokens are issued (default "/fence/"). */
  fencePath?: string;
  /** Frozen owner: ask after this long without progress (default 1000 ms) ... */
  stallAfterMs?: number;
  /** ... and steal its lock when it does not answer within this (default 1500 ms). */
  statusTimeoutMs?: number;
  /** One request's timeout (default 30000 ms). */
  sendTimeoutMs?: number;
  /** Records and fallback-lease lifetime (default 30000 ms). */
  leaseTTLMs?: number;
  /** Independent entities sent at once (default 4); records per claim (default 50). */
  concurrency?: number;
  batchSize?: number;
  /**
   * Records of an entity that may be charged (an attempt counted) before
   * they are sent (default 8). They are charged chargeAhead / 2 per
   * IndexedDB transaction, a step ahead of the sends: fewer transactions per
   * record, run while requests are on the network. A tab that dies
   * mid-flush may leave up to chargeAhead - 1 records charged an attempt
   * they never made; 1 counts exactly.
   */
  chargeAhead?: number;
  /** Use the IndexedDB lease even where Web Locks exist (tests). */
  noWebLocks?: boolean;
  /**
   * Pages register the Background Sync tag {@link SyncOutbox.syncTag} at
   * open and after enqueues (default true), best effort: where the origin
   * has a Service Worker and the browser a SyncManager (Chromium), the
   * worker drains the queue after the last tab is gone (see
   * tabfence-sw.js). False: never register.
   */
  backgroundSync?: boolean;
}

/** One operation to enqueue: for each operation type of `Ops`, its payload type. */
export type OutboxOp<Ops extends OperationMap = OperationMap> = {
  [K in keyof Ops & string]: {
    /** Selects the policy. */
    operationType: K;
    entityType?: string;
    /** Records of one entity are sent in order; without it a record is its own group. */
    entityId?: string;
    /** Dedupe key (replace-latest, merge, drop-if-exists). */
    operationKey?: string;
    /** The request body: a string or bytes as is, anything else as JSON.stringify(payload). */
    payload: Ops[K];
    /** Records (ids from enqueue) that must be acknowledged first. */
    dependencyIds?: string[];
  };
}[keyof Ops & string];

export interface OutboxStatus {
  pending: number;
  sending: number;
  failed: number;
  deadLetter: number;
  conflict: number;
  terminal: number;
  acked: number;
  /** Waiting records this build leaves alone for their payload schema (see {@link OutboxOptions.schemaVersion}). */
  unsupported: number;
  oldestPendingAgeMs: number;
  lastFlushAt: number | null;
  /** The last error; null again once sending works after a failure. */
  lastError: OutboxError | null;
  /**
   * Sending fails: the flush owner's last attempt (its fencing token
   * request or its sends) failed, the same in every tab. It clears once the
   * server answers again, or while nothing is left to send.
   */
  failing: boolean;
  /**
   * Why: "offline" (the browser reports no network), "unreachable" (no
   * answer: server down, network error, timeout), "server-error" (5xx, 408,
   * 425), "rate-limited" (429), "paused-auth" (a 401: the user's queue waits
   * for resume()), "unauthorized" / "refused" (the fencing token request got
   * a 401 / another 4xx; retried). null when not failing.
   */
  failure: OutboxFailure | null;
  /** When this spell of failures began (ms epoch), null when not failing. */
  failingSince: number | null;
  /**
   * When the owner tries again (ms epoch); null when not failing or when an
   * event does it (offline: the online event; paused-auth: resume()).
   */
  nextAttemptAt: number | null;
  /** Paused by pause() (for every tab). */
  paused: boolean;
  /** This tab holds the flush lock now. */
  leader: boolean;
  flushing: boolean;
  /** The current (or last) flush owner and its local lease token; its server token when known. */
  ownerId: string;
  leaseToken: number;
  fenceToken: number;
  /** This tab's owner id. */
  id: string;
}

export type OutboxFailure = "offline" | "unreachable" | "server-error" | "rate-limited" | "paused-auth" | "unauthorized" | "refused";

/**
 * Why a send (or a fencing token request) failed, a stable code:
 * - `"network"`: no answer (server down, network error, timeout);
 * - `"offline"`: the browser reports no network (the attempt is not charged);
 * - `` `http_${status}` ``: the receiver answered that status, e.g. "http_503", "http_409";
 * - `"fence_malformed"`: the fencing token answer had no token;
 * - `"lease_expired"`: the flush owner was lost while sending;
 * - `"payload_unreadable"`: the stored payload could not be read;
 * - `"schema_unsupported"`: no migration path to this build's schemaVersion;
 * - `"session_mismatch"`: the receiver authenticated another user than the record's.
 */
export type OutboxErrorCode =
  | "network"
  | "offline"
  | `http_${number}`
  | "fence_malformed"
  | "lease_expired"
  | "payload_unreadable"
  | "schema_unsupported"
  | "session_mismatch"
  /** The batch endpoint refused a page as too large (413): later pages are half as big. */
  | "batch_too_large"
  /** The batch endpoint does not speak the batch format (404, 405, 501, malformed): the outbox sends one record per request. */
  | "batch_unsupported"
  /** The batch endpoint did not attempt this record though no earlier record of its entity failed in the batch: retried with backoff. */
  | "not_attempted"
  /** The batch endpoint ran out of time or answer room before this record (not run): resent at once, then with backoff if it says so again. */
  | "server_busy";

export interface OutboxError {
  code: OutboxErrorCode;
  message: string;
  status: number;
  at: number | null;
}

/** A structured event; never carries the payload (the operation key only as a short hash). */
export interface OutboxEvent {
  kind:
    | "outbox.enqueue" | "outbox.flush.start" | "outbox.flush.skip_locked" | "outbox.record.claim"
    | "outbox.record.ack" | "outbox.record.retry" | "outbox.record.terminal" | "outbox.conflict"
    | "outbox.dead_letter" | "outbox.flush.step_down" | "outbox.auth_required" | "outbox.offline" | "outbox.record.unsupported"
    | "outbox.session_mismatch" | "outbox.batch.fallback" | "outbox.flush.end";
  at: number;
  recordId?: string;
  operationKeyHash?: string;
  ownerId?: string;
  leaseToken?: number;
  attempt?: number;
  durationMs?: number;
  reason?: string;
  errorCode?: OutboxErrorCode;
}

/** Where a record is in its life. */
export type RecordStatus = "pending" | "leased" | "sending" | "acked" | "retryable_failed" | "terminal_failed" | "dead_letter" | "conflict";

export interface OutboxRecordInfo {
  id: string;
  /** deadLetters(): "dead_letter", "conflict" or "terminal_failed"; unsupported(): a waiting status. */
  status: RecordStatus;
  operationType: string;
  operationKey: string;
  entityType: string;
  entityId: string;
  attempts: number;
  maxAttempts: number;
  createdAt: number;
  updatedAt: number;
  user: string;
  /** The payload schema the record was enqueued with. */
  schemaVersion: number;
  lastError: OutboxError | null;
}

/**
 * One tab's handle on a shared outbox. Promises reject with named Errors:
 * TypeError (bad arguments), NoSessionError, UnknownOperationError,
 * NotFoundError, InvalidStateError (closed; a record in the wrong state),
 * QuotaExceededError, AbortError (IndexedDB aborted the transaction: nothing
 * was written), StaleOwnerError, NetworkError, RuntimeExitedError,
 * SessionChangedError (another tab logged in or out during the flush),
 * SessionMismatchError (the receiver authenticated another user than the
 * records': they are held until the next login).
 */
export interface Outbox<Ops extends OperationMap = OperationMap> {
  readonly name: string;
  /** This tab's owner id. */
  readonly id: string;
  readonly lockName: string;
  readonly protocol: number;
  readonly schemaVersion: number;
  /** Durably records op (resolves after the IndexedDB commit), announces it to every tab, and triggers a flush. */
  enqueue(op: OutboxOp<Ops>): Promise<{ id: string; action: "appended" | "replaced" | "merged" | "dropped" }>;
  /** Flushes now if no other tab does (skipped: another tab holds the lock and flushes). */
  flush(): Promise<{ skipped: boolean; paused: boolean; claimed: number; acked: number; retried: number; deadLettered: number; terminal: number; conflicts: number; /** HTTP requests made (single or batch). */ requests: number }>;
  /** The shared projection, read from IndexedDB. */
  status(): Promise<OutboxStatus>;
  /** Pushed after every change in any tab. Returns the unsubscribe function. */
  onStatus(fn: (status: OutboxStatus) => void): () => void;
  onEvent(fn: (event: OutboxEvent) => void): () => void;
  /** Dead letters, conflicts and terminal failures: the records that need the app. */
  deadLetters(): Promise<OutboxRecordInfo[]>;
  /** The waiting records this build leaves alone for their payload schema (see {@link OutboxOptions.schemaVersion}). */
  unsupported(): Promise<OutboxRecordInfo[]>;
  /** Puts a dead letter, conflict or terminal record back in the queue (same idempotency key). */
  retry(id: string): Promise<void>;
  /** Deletes a dead letter, conflict or terminal record the app resolved. */
  discard(id: string): Promise<void>;
  /** Stops sending in every tab until resume(). */
  pause(): Promise<void>;
  /** Lifts the pause (and the current user's 401 pause) and flushes. */
  resume(): Promise<void>;
  /**
   * Logs the queue in as user, in every tab: the session is the queue's, as
   * a cookie is the browser's. Resolves once it is stored in IndexedDB. From
   * then on only user's records are sent, by whichever tab flushes; a flush
   * in flight in another tab stops before its next send when it hears of the
   * login on the channel, else before its next batch. This tab's new
   * records are user's. Another tab keeps enqueueing for the user its page
   * last logged in as: those records wait for that user's next login. Every
   * record is sent with an `X-Client-User` header naming its user (allow it
   * in CORS for a cross-origin endpoint); a receiver that authenticated
   * someone else answers 403 `session-mismatch`, and that user's records are
   * held, pending and uncharged, until the next login.
   */
  login(user: string): Promise<void>;
  /**
   * Logs the queue out, in every tab. With purge this tab's user's records
   * are deleted (resolves to how many); without, they are kept, never sent
   * under another user, and it resolves to 0.
   */
  logout(options?: { purge?: boolean }): Promise<number>;
  /** Stops this tab's triggers and releases the lock; the queue stays. */
  close(): Promise<void>;
}

// ---- tf.backgroundSync: the outbox in a Service Worker ----

export interface Tabfence {
  /**
   * Opens the outbox as a Service Worker does (tabfence-sw.js calls it),
   * from the same options the pages give {@link Tabfence.outbox}: it sends
   * nothing by itself, only when {@link SyncOutbox.drain} is called. It
   * shares the queue, the flush lock, the lease and the fencing tokens with
   * the tabs, answers their watchdog while it flushes and is stolen from
   * like a tab.
   * Without `user`: the worker sends as the queue's session user (a page's
   * login); it never logs one in for every tab.
   * @throws TypeError (rejection) for bad options or a `user` option; NotSupportedError in tabfence-core.wasm.
   */
  backgroundSync<Ops extends OperationMap = OperationMap>(options: Omit<OutboxOptions<Ops>, "user">): Promise<SyncOutbox>;
}

/** A worker's handle on a shared outbox. */
export interface SyncOutbox {
  readonly name: string;
  readonly lockName: string;
  /** The Background Sync tag the pages register: the lock name. */
  readonly syncTag: string;
  readonly protocol: number;
  readonly schemaVersion: number;
  /**
   * Waits for the flush lock (a tab holding it is flushing) up to timeoutMs
   * (default 120000), then flushes until nothing due is left and reports.
   * Never rejects for an outcome (offline, server errors, no session):
   * those are in the report. Rejects with TypeError for bad options and
   * InvalidStateError once closed.
   */
  drain(options?: { lastChance?: boolean; timeoutMs?: number }): Promise<SyncReport>;
  /** Releases the queue's database and channel. Idempotent. */
  close(): Promise<void>;
}

/**
 * Why a drain ended: "done" (nothing left to send for the queue's user),
 * "more" (unsettled records remain, e.g. backing off after a 5xx),
 * "offline", "fence" (no fencing token), "busy" (the flush lock stayed held
 * until timeoutMs), "stale" (a tab took over mid-drain), "auth" (the
 * receiver wants a new login), "paused", "no-session", "error".
 */
export type SyncReason = "done" | "more" | "offline" | "fence" | "busy" | "stale" | "auth" | "paused" | "no-session" | "error";

export interface SyncReport {
  acked: number;
  retried: number;
  deadLettered: number;
  claimed: number;
  /** Records that failed for good (4xx), and conflicts, in this drain. */
  terminal: number;
  conflicts: number;
  /** HTTP requests the drain made (single POSTs or batches). */
  requests: number;
  /** Unsettled records of the queue's user left (of every user without a session). */
  remaining: number;
  /**
   * The sync event should fail so the browser retries later: true for
   * more, offline, fence, busy, stale and error, never on the last chance
   * (the records stay queued for the pages).
   */
  retry: boolean;
  reason: SyncReason;
}

// ---- tf.connection: one realtime connection per browser ----

export interface Tabfence {
  /**
   * Joins the realtime connection of `scope`: the tabs elect a leader on the
   * Web Lock `"tabfence:rt-<scope>:v<protocol>"` (fenced); only the leader
   * opens the WebSocket. It writes each server delta to the IndexedDB replica
   * under its fencing token, then announces it on the channel of the same
   * name; every tab's onDelta hears it once the replica holds it.
   * Not in tabfence-core.wasm (nor in a build with `-tags tabfence_noconnection`).
   * @throws TypeError (rejection) for bad options.
   */
  connection(options: ConnectionOptions): Promise<Connection>;
}

export interface ConnectionOptions {
  /**
   * What the tabs share (a workspace id): with the protocol it names the lock, channel and database.
   * At most 148 bytes with protocol 1 (a tab's channel name adds its id); longer is a TypeError.
   */
  scope: string;
  /** Separates builds that cannot share a replica, an integer >= 1 (default 1). */
  protocol?: number;
  /**
   * The WebSocket URL (ws:, wss:, or a path resolved against the page), or a
   * function returning it (or a promise of it) at each dial, e.g. to fetch a
   * short-lived ticket; its throw or rejection fails that dial, which is
   * retried with backoff. Browsers send cookies with the upgrade, never
   * custom headers.
   */
  url: string | (() => string | Promise<string>);
  /** The replica: its object stores (1 to 64 distinct names, string keys) and their schema version (default 1). */
  replica: { stores: string[]; version?: number };
  /** The user the replica belongs to; the server refuses another user's credentials. */
  user?: string;
  /**
   * Where the leader gets a server fencing token, once per term, before it
   * dials (POST fencePath + the URL-encoded resource, with the page's
   * cookies; the answer is {"token":N}, e.g. the receiver's FenceHandler).
   * The resource names this browser (a random id kept in its database), so
   * another browser of the same user never deposes this one; a later leader
   * of this browser makes a deposed one's mutations stale. Without it,
   * mutations are sent unfenced (the server still applies each id once).
   */
  fencePath?: string;
  /**
   * Where the leader reloads the whole replica when the server resets it (it no longer holds the
   * deltas after this browser's version): GET with the page's cookies, answered
   * `{"version": N, "changes": Change[]}`. Without it a reset empties the replica stores and only
   * the next deltas refill what they touch.
   */
  snapshot?: string;
  /** Ping interval on a ready connection (default 30000). */
  pingEveryMs?: number;
  /** A ping (or hello) unanswered this long replaces the socket (default 10000). */
  pongTimeoutMs?: number;
  /** Reconnect backoff with full jitter (default base 1000, cap 300000). */
  backoff?: { base?: number; cap?: number };
  /** Watchdog: followers steal from a leader silent this long (0, or 3000 to 3600000; off by default). */
  stallAfterMs?: number;
  /** How often a hidden tab tells its listeners (default 1000; a visible tab tells them at once). */
  hiddenNotifyMs?: number;
}

/** One change of a delta: a record written (value) or deleted. */
export type Change = { store: string; key: string; value: unknown } | { store: string; key: string; deleted: true };

export interface Delta {
  version: number;
  changes: Change[];
}

export type ConnectionState = "connecting" | "ready" | "unauthorized" | "offline" | "outdated" | "closed";

/**
 * Why a tab's connection ended: "deleted" (another tab signed out), "upgraded" (a newer build: reload),
 * "storage-closed" (the browser closed the database: site data cleared, a disk error), "closed" (close()).
 */
export type ConnectionClosed = "deleted" | "upgraded" | "storage-closed" | "closed";

export interface ConnectionStatus {
  /** This tab holds the socket. */
  leader: boolean;
  /**
   * The leader's connection: connecting / ready / unauthorized (signed out: waits until asked, see retry) /
   * offline / outdated (the server does not speak this build's protocol: it waits until asked; reload a newer
   * build); closed once this tab's connection ended.
   */
  state: ConnectionState;
  /** The replica version this tab holds. */
  version: number;
  /** Mutations not yet acknowledged (of every tab), and the oldest one's age. */
  pending: number;
  oldestPendingAgeMs: number;
  /** The leader's fencing token. */
  token: number;
  leaderId: string;
  /** This tab's id. */
  id: string;
  /** The connection's last error in words, null once ready. */
  lastError: string | null;
  /** Why this tab's connection ended; null while open. */
  closed: ConnectionClosed | null;
  /** The "work offline" switch (setOffline, from any tab of this browser) is on. */
  offline: boolean;
}

export interface MutationInput<P = unknown> {
  op: string;
  entity?: string;
  /** A string, a Uint8Array, or JSON-serializable (sent as JSON.stringify(payload)). */
  payload: P;
  /** The idempotency key (default a random id), at most 200 bytes. */
  id?: string;
}

export interface PendingMutation<P = unknown> extends Required<MutationInput<P>> {
  /** When it was made (ms epoch). */
  madeAt: number;
}

export interface MutationAck {
  id: string;
  status: number;
  /** The server had applied it already (a resend after a failover). */
  replayed: boolean;
  /** The server's answer, JSON.parse'd when it is JSON (else its text; null when empty). */
  result: unknown;
}

/** mutate()'s rejection when the server refused the mutation (name "MutationRejectedError"). */
export interface MutationRejectedError extends TabfenceError {
  problem: { type: string; title: string; detail: string; status: number };
}

/**
 * One tab's handle on the connection. Promises reject with named Errors:
 * TypeError (bad arguments), MutationRejectedError, InvalidStateError (the
 * connection is closed), the browser's IndexedDB errors, RuntimeExitedError.
 */
export interface Connection {
  readonly scope: string;
  readonly protocol: number;
  readonly lockName: string;
  readonly database: string;
  /**
   * Stores the mutation in the pending store (every tab shows it at once,
   * onPending), and resolves with its ack, sent by whichever tab leads now or
   * after a failover (the server applies an id once). Rejects with a
   * MutationRejectedError when the server refuses it, with a
   * MutationNotStoredError when it could not be stored (tried again once the
   * page resumes from a freeze): then nothing was saved or sent. Rejects with
   * a plain Error when a leader settled it but this tab missed the answer
   * (the replica shows its effect).
   */
  mutate<P = unknown>(m: MutationInput<P>): Promise<MutationAck>;
  /** The pending mutations, oldest first (payloads JSON.parse'd when they are JSON). */
  pending(): Promise<PendingMutation[]>;
  /** The records of one replica store. */
  read<V = unknown>(store: string): Promise<Array<{ key: string; value: V }>>;
  /** Every delta, in version order, once the replica holds it. Returns the unsubscribe function. */
  onDelta(fn: (delta: Delta) => void): () => void;
  /** This tab missed deltas (or the server reset the replica): read() again; it holds at least `version`. */
  onReload(fn: (version: number) => void): () => void;
  onPending(fn: (pending: PendingMutation[]) => void): () => void;
  status(): ConnectionStatus;
  onStatus(fn: (status: ConnectionStatus) => void): () => void;
  /** Asks the leader for its status: an unauthorized leader then connects again (after a new sign-in). */
  retry(): Promise<void>;
  /** The "work offline" switch, for every tab: while on, the leader closes its socket and mutations wait (pending). */
  setOffline(offline: boolean): Promise<void>;
  /** Deletes the replica's database: every tab's connection closes ("deleted"), the leader releases its lock. */
  signOut(): Promise<void>;
  /** Leaves the connection; a leader releases its lock and the next tab connects. */
  close(): Promise<void>;
}
