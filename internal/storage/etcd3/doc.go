// Package etcd3 implements storage.Store on etcd v3: objects are encoded
// with a codec and written with compare-and-swap transactions, reads carry
// the etcd revision as resourceVersion, and each Store keeps a watch cache
// (current objects plus a ring of recent events) that serves watches and
// resourceVersion="0" lists.
package etcd3
