// Package hugepages asks Linux to back the process's anonymous memory (the Go
// heap above all) with transparent huge pages when the kernel leaves that to
// each program (THP mode "madvise"), as it would for every program in mode
// "always".
//
// A page fault costs microseconds, and far more on virtual machines whose page
// tables the hypervisor shadows: a server whose heap grows by hundreds of
// megabytes under a burst of writes spends a tenth of its CPU time faulting
// in 4 KiB pages. A 2 MiB huge page takes one fault for 512 of them.
package hugepages
