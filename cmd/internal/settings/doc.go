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
// Usage with the standard library's flag package:
//
//	fs := settings.NewFlagSet("serve", os.Getenv)
//	listen := fs.String("listen", "KECE_LISTEN", "127.0.0.1:8080", "address to listen on")
//	ttl := fs.Duration("lease-ttl", "KECE_LEASE_TTL", time.Minute, "lease duration")
//	dsn := fs.Secret("mysql-dsn", "KECE_MYSQL_DSN", "KECE_MYSQL_DSN_FILE", "control database DSN")
//	if err := fs.Parse(args); err != nil {
//		// errors.Join of *settings.Error, one per bad setting
//		return err
//	}
//	// *dsn now holds the value, from the flag, the variable or the file.
//
// Usage with cobra/pflag (no dependency here: adapt each flag to a Flag):
//
//	var fl []settings.Flag
//	cmd.Flags().VisitAll(func(f *pflag.Flag) {
//		fl = append(fl, settings.Flag{Name: f.Name, Env: envOf[f.Name], Changed: f.Changed, Set: f.Value.Set})
//	})
//	err := settings.ApplyEnv(fl, os.Getenv)
//
// and settings.ReadSecretFile for a *_FILE value. In main:
//
//	if settings.IsConfigError(err) { os.Exit(settings.ExitConfig) }
//
// The package reads only what it is given (getenv, files named by
// settings); it keeps no global state.
package settings
