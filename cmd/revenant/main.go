package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is set by the build (-ldflags "-X main.version=…").
var version = "dev"

// errUsage marks a command-line mistake: exit code 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:])
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "revenant:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "revenant:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	cmd := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, os.Getenv)
	case "simulate":
		return simulate(ctx, args, os.Getenv, os.Stdout)
	case "version":
		fmt.Println("revenant", version)
		return nil
	}
	return fmt.Errorf("unknown command %q (want serve, simulate or version): %w", cmd, errUsage)
}
