package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// installOnce runs install once per machine for the cache directory
// ~/.cache/msgx/<name> (created, and passed to install) and returns that
// directory. Concurrent callers — test packages run in parallel, in several
// processes — wait on a file lock for the one that installs; a marker file
// written after install succeeded tells later callers it is done, so an
// install cut short is redone whole. what names the cache in errors.
func installOnce(name, what string, install func(cache string) error) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for %s: %w", what, err)
	}
	cache := filepath.Join(base, "msgx", name)
	done := filepath.Join(cache, "installed")
	if _, err := os.Stat(done); err == nil {
		return cache, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(cache, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", cache, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(done); err == nil {
		return cache, nil // another process installed it meanwhile
	}
	if err := install(cache); err != nil {
		return "", err
	}
	if err := os.WriteFile(done, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return "", err
	}
	return cache, nil
}
