package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Python returns the interpreter of a virtual environment holding the
// pinned packages of the pip requirements file requirements, installed from
// PyPI once per machine into ~/.cache/msgx/python-<hash of the file>
// (a changed file gets a new environment). Concurrent callers (test
// packages run in parallel) wait for one installation. It needs python3
// with its venv module (make services installs them); a failure (no
// python3, PyPI unreachable) is one error naming the cause.
func Python(requirements string) (string, error) {
	reqs, err := os.ReadFile(requirements)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(reqs)
	cache, err := installOnce("python-"+hex.EncodeToString(sum[:6]), "a Python environment", func(cache string) error {
		if _, err := exec.LookPath("python3"); err != nil {
			return fmt.Errorf("installing %s: python3 is not installed (make services installs it)", requirements)
		}
		venv := filepath.Join(cache, "venv")
		_ = os.RemoveAll(venv)
		if out, err := exec.Command("python3", "-m", "venv", venv).CombinedOutput(); err != nil {
			return fmt.Errorf("creating a Python environment in %s failed (python3 -m venv; Debian needs python3-venv): %v: %s", venv, err, lastLines(out, 3))
		}
		cmd := exec.Command(filepath.Join(venv, "bin", "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input", "-r", requirements)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("installing %s from PyPI failed (pip install -r): %v: %s", requirements, err, lastLines(out, 3))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "venv", "bin", "python"), nil
}
