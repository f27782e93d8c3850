// Package pause builds skiff's pause program, the process that holds a pod
// sandbox's namespaces, as a tiny static Linux executable assembled from
// hand-encoded machine code, and the one-layer OCI image that carries it.
//
// The program blocks SIGTERM and SIGINT, waits for either with
// rt_sigtimedwait, then exits with status 0. Blocking the signals matters:
// the pause process is PID 1 of its PID namespace, and the kernel discards
// signals with a default disposition sent to such a process, but queues
// blocked ones. It does not reap zombies. The executable is built in memory
// from the instruction words in pause.go: no toolchain, network or committed
// binary is needed, and the output is byte-for-byte reproducible.
package pause
