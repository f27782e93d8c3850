package netnslock

import (
	"errors"
	"os"
	"strconv"
	"testing"
)

func TestAcquire(t *testing.T) {
	dir := t.TempDir()
	release, err := Acquire(dir, "component")
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file: a second open in this process
	// is refused as another process's would be, naming the holder.
	_, err = Acquire(dir, "component")
	var held *HeldError
	if !errors.As(err, &held) || held.PID != strconv.Itoa(os.Getpid()) {
		t.Fatalf("second Acquire: %v, want a HeldError naming pid %d", err, os.Getpid())
	}
	// Another component's lock is independent.
	other, err := Acquire(dir, "other")
	if err != nil {
		t.Fatalf("another component: %v", err)
	}
	other()
	release()
	again, err := Acquire(dir, "component")
	if err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}
	again()
}
