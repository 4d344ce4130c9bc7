// Types for tabfence-sw.js, Background Sync for the outbox in a module
// Service Worker ("tabfence/sw").

import type { OutboxOptions, SyncReport } from "./tabfence.js";

/** What {@link BackgroundSyncOptions.onReport} gets for every tabfence sync event. */
export type SyncEventReport = SyncReport & {
  /** The event's tag: the queue's {@link SyncOutbox.syncTag}. */
  tag: string;
  /** The browser's last attempt for this registration (retry is then false). */
  lastChance: boolean;
  /** Why the runtime did not load or the queue did not open (reason "error"). */
  error?: string;
};

export interface BackgroundSyncOptions {
  /**
   * The options the pages give tf.outbox for each queue the worker drains
   * (share one module), without `user`: the worker sends as the queue's
   * session user (a page's login) and refuses a user option.
   */
  outboxes: Omit<OutboxOptions<any>, "user"> | Omit<OutboxOptions<any>, "user">[];
  /** The runtime (default: tabfence.wasm beside tabfence.js). */
  wasmURL?: string | URL;
  /**
   * The Cache API cache the worker keeps the runtime in (default
   * "tabfence-runtime"), cleared by the worker's activate so a new version
   * never runs an old module; false: always fetch it.
   */
  cache?: string | false;
  /** How long a drain waits for the flush lock a tab holds, and flushes (default 120000 ms; drain checks its range). */
  lockWaitMs?: number;
  /** Called after every tabfence sync event the worker handled. */
  onReport?(report: SyncEventReport): void;
}

/**
 * Drains the outboxes on their Background Sync events (tags starting
 * "tabfence:outbox-"; others are left to the app's listeners): the runtime
 * is loaded on the first event, each queue opened once per worker
 * lifetime with tf.backgroundSync, and the event fails when the report
 * says retry, so the browser tries again later. Call it once,
 * synchronously, at the top level of the worker script.
 * @throws TypeError outside a Service Worker, when called twice or late, or for bad options of its
 * own (outboxes not objects, wasmURL, cache, onReport, lockWaitMs not a number). Bad outbox
 * options, and a lockWaitMs drain refuses, show up in the reports instead (reason "error", no retry).
 */
export function backgroundSync(options: BackgroundSyncOptions): void;
