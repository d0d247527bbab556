// Package settings is the one settings loader of the KECE binaries
// (kece-control, kece-node, kecectl): every flag has an environment
// variable, secrets may come from a file (`*_FILE`), and every bad setting
// is an *Error that names the setting, so main exits 2 (ExitConfig) and a
// supervisor does not restart a process that cannot start.
//
// Rules it enforces:
//
//   - Precedence: a flag given on the command line wins over its
//     environment variable, which wins over the default.
//   - Every flag registered through a FlagSet names its variable; Parse
//     refuses a flag registered without one (a programming error), so
//     "every flag has a variable" holds by construction, and -h shows it.
//   - A value that does not parse refuses to start, naming the variable
//     (`KECE_LEASE_TTL="sixty": invalid value …`); it never falls back to a
//     default.
//   - A secret (FlagSet.Secret) comes from --name / KECE_NAME, or from a file
//     named by --name-file / KECE_NAME_FILE (the form to use: values on a
//     command line are visible in ps, values in env files leak into dumps).
//     Giving both is refused. The file must not be writable by its group or
//     accessible to others (0600 or 0640, as systemd's LoadCredential= and a
//     root:service 0640 file both are); 0644 is refused with exit 2.
//
// Usage with cobra (the flags are pflag flags):
//
//	fs := settings.NewFlagSet("serve", os.Getenv)
//	listen := fs.String("listen", "KECE_LISTEN", "127.0.0.1:8080", "address to listen on")
//	ttl := fs.Duration("lease-ttl", "KECE_LEASE_TTL", time.Minute, "lease duration (90s, 15m, 7d)")
//	dsn := fs.Secret("mysql-dsn", "KECE_MYSQL_DSN", "KECE_MYSQL_DSN_FILE", "control database DSN")
//	fs.Deprecated("ttl", "lease-ttl") // an old name, hidden, for one release
//	cmd.Flags().AddFlagSet(fs.Flags())
//	cmd.RunE = func(*cobra.Command, []string) error {
//		if err := fs.Apply(); err != nil {
//			// errors.Join of *settings.Error, one per bad setting,
//			// the command line's bad values included
//			return err
//		}
//		// *dsn now holds the value, from the flag, the variable or the file.
//	}
//
// FlagSet.Parse does cobra's part and Apply in one call. A command whose
// flags are not built here (kecectl's global flags) passes them to
// ApplyEnv:
//
//	err := settings.ApplyEnv([]settings.Flag{{Name: "url", Env: "KECE_ADMIN_URL", Changed: f.Changed, Set: f.Value.Set}}, os.Getenv)
//
// and settings.ReadSecretFile for a *_FILE value. In main:
//
//	if settings.IsConfigError(err) { os.Exit(settings.ExitConfig) }
//
// The package reads only what it is given (getenv, files named by
// settings); it keeps no global state.
package settings
