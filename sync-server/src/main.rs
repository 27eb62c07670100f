//! `memoria-sync`: run the sync server, and manage access tokens.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use memoria_shared::{Clock, SystemClock};
use memoria_sync_server::layout::UserId;
use memoria_sync_server::store::StoreUrl;
use memoria_sync_server::{OsRandom, Settings, auth};

/// jemalloc, returning freed pages at once (`.cargo/config.toml`): the server's memory follows
/// what its requests in flight hold, the bound `docs/sync-server.md` states.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "memoria-sync", version, about = "Memoria's sync server")]
struct Cli {
    /// Config file (TOML); settings from the environment override it.
    #[arg(long, global = true, env = "MEMORIA_SYNC_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the sync API.
    Serve {
        /// `fs:DIR` or `s3://BUCKET[?endpoint=URL&region=R]` (env MEMORIA_SYNC_STORE).
        #[arg(long)]
        store: Option<StoreUrl>,
        /// Address to listen on, e.g. `0.0.0.0:8787` (env MEMORIA_SYNC_LISTEN); port 0 picks one.
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
    },
    /// Create or revoke access tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token for a user; it is printed once, as the last line, and only its hash is kept.
    Create {
        #[arg(long)]
        store: Option<StoreUrl>,
        /// The user id the token signs in as.
        #[arg(long)]
        user: String,
    },
    /// Revoke a token.
    Revoke {
        #[arg(long)]
        store: Option<StoreUrl>,
        token: String,
    },
}

fn settings(config: Option<&PathBuf>, store: Option<StoreUrl>) -> anyhow::Result<Settings> {
    let mut s = Settings::load(config.map(|p| p.as_path()), |k| std::env::var(k).ok())?;
    if let Some(store) = store {
        s.store = store;
    }
    Ok(s)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutdown requested");
}

/// How long the runtime waits, once serving has ended, for store calls still running on
/// blocking threads (a filesystem store on a hung mount): the shutdown bound must hold.
const BLOCKING_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(1);

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MEMORIA_SYNC_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(run(cli));
    runtime.shutdown_timeout(BLOCKING_SHUTDOWN);
    result
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve { store, listen } => {
            let mut s = settings(cli.config.as_ref(), store)?;
            if let Some(listen) = listen {
                s.listen = listen;
            }
            let listener = tokio::net::TcpListener::bind(s.listen)
                .await
                .with_context(|| format!("cannot listen on {}", s.listen))?;
            let addr = listener.local_addr()?;
            tracing::info!(
                store = %s.store,
                %addr,
                admin = s.admin_key.is_some(),
                limits = ?s.limits,
                "serving"
            );
            println!("listening on http://{addr}");
            memoria_sync_server::serve(&s, listener, shutdown_signal())
                .await
                .context("server failed")?;
        }
        Command::Token { command } => match command {
            TokenCommand::Create { store, user } => {
                let s = settings(cli.config.as_ref(), store)?;
                let user = UserId::new(&user).context("invalid --user")?;
                let store = s.store.open()?;
                let token =
                    auth::create_token(store.as_ref(), &OsRandom, &user, SystemClock.now_ms())
                        .await?;
                println!("token for {user} (shown once; only its hash is stored):");
                println!("{token}");
            }
            TokenCommand::Revoke { store, token } => {
                let s = settings(cli.config.as_ref(), store)?;
                let store = s.store.open()?;
                if !auth::revoke_token(store.as_ref(), &token).await? {
                    bail!("no such token: it was never issued by this store or is already revoked");
                }
                println!("token revoked");
            }
        },
    }
    Ok(())
}
