//! memoria-desktop: the desktop shell.
