// Package pki creates, persists and reuses skiff's certificate authority, the API
// server's serving certificate, client certificates and the kubeconfigs that embed them.
//
// Everything lives as PEM files in a directory (normally <data-dir>/pki, mode 0700; private
// keys 0600). Every Ensure* function is idempotent: it reuses what is already on disk when
// it is still good and writes new files atomically (temporary file + rename) otherwise.
// The CA is never regenerated behind the user's back: only when both of its files are
// absent. Leaf certificates are cheap and are re-issued from the same CA whenever they are
// missing, unreadable, expiring or no longer match what the caller asks for.
package pki
