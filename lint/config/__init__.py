"""Settings: what the command line, the project file and the checkpoint's own file may set, merged and
validated into one frozen `Settings`."""
