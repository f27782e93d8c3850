package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// StopTimeout is how long Stop waits after SIGTERM before it sends SIGKILL.
const StopTimeout = 30 * time.Second

// ErrKilled is wrapped by Stop's error when the process ignored SIGTERM for
// the whole timeout and was killed.
var ErrKilled = errors.New("did not exit after SIGTERM; sent SIGKILL")

// Process is a child process the test started. Its zero value is not usable;
// use startProcess.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	// err is cmd.Wait's result; valid once done is closed.
	err error
}

// startProcess starts cmd and a goroutine that waits for it. The child gets
// SIGKILL if the test binary dies first (Pdeathsig), so a crashed or
// timed-out test run leaves nothing behind.
func startProcess(cmd *exec.Cmd) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and its Wait error if so.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// ExitCode is the exit code once the process exited (-1 if a signal killed
// it), or -1 while it runs.
func (p *Process) ExitCode() int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Stop sends SIGTERM to the process and waits for it to exit; after timeout
// it sends SIGKILL and reports that the process did not stop. It returns
// nil only when the process exited with status 0 on its own after SIGTERM
// (or had already done so).
func (p *Process) Stop(timeout time.Duration) error {
	if exited, err := p.Exited(); exited {
		return exitError(p, err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGTERM pid %d: %w", p.PID(), err)
	}
	select {
	case <-p.done:
		return exitError(p, p.err)
	case <-time.After(timeout):
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	return fmt.Errorf("pid %d, waited %v: %w", p.PID(), timeout, ErrKilled)
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Process) Kill() {
	if exited, _ := p.Exited(); exited {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func exitError(p *Process, err error) error {
	if err != nil {
		return fmt.Errorf("pid %d: %w", p.PID(), err)
	}
	return nil
}
