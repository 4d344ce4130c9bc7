//go:build !tabfence_core && !tabfence_noconnection

// Package connection is tf.connection, the JavaScript binding of
// realtime/browser's Conn: Open reads the page's options (validated by
// package jsapi's native rules), and the object it returns calls the
// Conn's methods, its values crossing as plain objects (JSON parsed by
// the JavaScript engine). Builds with -tags tabfence_core or
// tabfence_noconnection leave it out, so the bench can measure what the
// connection adds to the download.
package connection
