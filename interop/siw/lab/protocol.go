package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// Layout of the share, relative to its root (the guest mounts it at /mnt).
const (
	cmdDir      = "cmd"         // host → guest: <id>.job, <id>.kill.<n>, poweroff
	resDir      = "res"         // guest → host: <id>.out, <id>.err, <id>.pid, <id>.listen, <id>.exit
	outDir      = "out"         // captures and files that scenarios keep
	agentReady  = "agent.ready" // written once by the agent when it serves
	agentBinary = "agent"       // the agent executable, copied in by the host before boot
	poweroffCmd = "poweroff"

	// GuestShare is where the guest mounts the share.
	GuestShare = "/mnt"
)

// jobSpec is the content of cmd/<id>.job.
type jobSpec struct {
	ID   string   `json:"id"`
	Argv []string `json:"argv"`
	Env  []string `json:"env,omitempty"`
	// ListenPort, if not zero, makes the agent write res/<id>.listen once a
	// TCP socket in LISTEN state on that port exists. The port must have no
	// listener when the job starts; otherwise the job is refused, so that a
	// leftover listener can never be taken for the new one.
	ListenPort int `json:"listen_port,omitempty"`
}

// exitInfo is the content of res/<id>.exit.
type exitInfo struct {
	Code   int    `json:"code"`             // exit status; -1 if killed by a signal or not started
	Signal string `json:"signal,omitempty"` // name of the fatal signal
	Error  string `json:"error,omitempty"`  // why the job could not run
	WallMS int64  `json:"wall_ms"`
}

// readyInfo is the content of agent.ready.
type readyInfo struct {
	Kernel string `json:"kernel"`
	PID    int    `json:"pid"`
}

var jobIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,80}$`)

func validJobID(id string) bool { return jobIDRe.MatchString(id) && filepath.Ext(id) == "" }

// writeFlag writes data to path so that readers see either nothing or all of
// it: the bytes go to a temporary name in the same directory, then rename.
func writeFlag(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func writeJSONFlag(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFlag(path, append(b, '\n'))
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
