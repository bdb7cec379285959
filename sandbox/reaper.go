package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwardedSignals are passed from the stub (PID 1, which the kernel shields from
// signals it has no handler for) to the command's process group.
var forwardedSignals = []os.Signal{
	unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2,
}

// runAsInit starts the command and stays PID 1 of the namespace: it forwards signals,
// reaps every orphan, and when the command exits kills whatever is left, so that the
// namespace is empty when the stub returns. sigs has the forwarded signals registered.
func runAsInit(run goConfig, sigs chan os.Signal) stubExit {
	path, err := lookPath(run.Command[0], envValue(run.Env, "PATH"))
	if err != nil {
		code := 127
		if errors.Is(err, os.ErrPermission) {
			code = 126
		}
		return stubExit{Code: code, ExecError: err.Error()}
	}
	attr := &syscall.ProcAttr{
		Dir:   run.Dir,
		Env:   run.Env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: !run.TTY, Setsid: run.TTY, Setctty: run.TTY, Ctty: 0},
	}
	pid, err := syscall.ForkExec(path, run.Command, attr)
	if err != nil {
		code := 126
		if errors.Is(err, unix.ENOENT) {
			code = 127
		}
		return stubExit{Code: code, ExecError: "exec " + path + ": " + err.Error()}
	}
	_ = sendMsg(ctlFD, stubMsg{Started: pid})

	go func() {
		for s := range sigs {
			sig := s.(syscall.Signal)
			if err := unix.Kill(-pid, sig); err != nil {
				_ = unix.Kill(pid, sig)
			}
		}
	}()

	var ex stubExit
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			ex.Code = 1
			ex.ExecError = "wait: " + err.Error()
			break
		}
		if wpid != pid {
			continue // an orphan re-parented to us
		}
		switch {
		case ws.Exited():
			ex.Code = ws.ExitStatus()
		case ws.Signaled():
			ex.Signal = int(ws.Signal())
			ex.Code = 128 + ex.Signal
		}
		break
	}
	ex.Survivors = listSurvivors()
	if len(ex.Survivors) > 0 {
		// As init, kill(-1) reaches every process of the namespace but us.
		_ = unix.Kill(-1, unix.SIGKILL)
	}
	for {
		_, err := unix.Wait4(-1, nil, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			break
		}
	}
	return ex
}

// listSurvivors names the processes of the namespace other than the stub.
func listSurvivors() []survivor {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []survivor
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		out = append(out, survivor{PID: pid, Comm: strings.TrimSpace(string(comm))})
	}
	return out
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPath resolves name on the command's own PATH (not the stub's).
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, checkExecutable(name)
	}
	var firstErr error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && !errors.Is(err, os.ErrNotExist) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", &os.PathError{Op: "look up", Path: name, Err: os.ErrNotExist}
}

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() || unix.Access(p, unix.X_OK) != nil {
		return &os.PathError{Op: "exec", Path: p, Err: os.ErrPermission}
	}
	return nil
}
