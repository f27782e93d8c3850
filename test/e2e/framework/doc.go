// Package framework runs the real skiff binary and the real kubectl binaries
// for end-to-end tests: it builds skiff once per test binary (Run), starts
// `skiff server` processes on fresh data directories and free loopback ports
// (StartServer), and runs kubectl of a chosen minor version against them.
// Every process it starts is stopped by PID when the test ends.
package framework
