// Package etcd runs skiff's embedded single-member etcd server and connects
// clients to it or to an external etcd cluster.
package etcd
