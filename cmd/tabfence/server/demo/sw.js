// The demo's Service Worker (a module worker at /sw.js, scope /): when the
// browser fires Background Sync, it sends the notes still queued, also
// after every tab closed, with the tabs' own outbox code, lock and fences
// (each note once, whoever sends it). The pages register the sync tag after
// each edit; where the browser has no Background Sync, their own triggers
// (online, focus, ...) are the whole mechanism.
//
// Its options are the pages' (notes-options.js), read from this script's
// URL: the page registers /sw.js?<its outbox parameters>.
import { backgroundSync } from "/dist/tabfence-sw.js";
import { notesOptions } from "./notes-options.js";

backgroundSync({ outboxes: [notesOptions(new URLSearchParams(self.location.search))] });

// It controls no page (no fetch handler), so a new version takes over at
// once, beside pages of the old build (the outbox's versions keep them apart).
self.addEventListener("install", () => self.skipWaiting());
