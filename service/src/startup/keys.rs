//! API keys at start-up and on the command line: the first start's bootstrap keys, and
//! `fulfillment keys` (create, list, revoke).

use super::*;

/// The keys a first start created (the store held none), shown once in the start banner.
#[derive(Debug, Clone)]
pub struct BootstrapKeys {
    pub operator: (String, KeyText),
    pub client: (String, KeyText),
}

/// The principals a first start creates a key for.
pub const BOOTSTRAP_OPERATOR_NAME: &str = "admin";
pub const BOOTSTRAP_CLIENT_NAME: &str = "shop";

/// On the embedded backend's first start (no key at all in the store), an operator key and a
/// client key, so the service is usable at once; they are shown once and only their hashes
/// kept. On AWS keys come from `fulfillment keys` (replicas start at once; none of them
/// should print keys into its logs).
pub(super) async fn bootstrap_keys(
    kind: Backend,
    keys: &dyn KeyRepository,
) -> Result<Option<BootstrapKeys>, StartupError> {
    if kind != Backend::Embedded {
        return Ok(None);
    }
    if !keys.list_keys().await.map_err(keys_failed)?.is_empty() {
        return Ok(None);
    }
    let (operator, _) = api::keys::create(keys, BOOTSTRAP_OPERATOR_NAME, Role::Operator)
        .await
        .map_err(StartupError::Keys)?;
    let (client, _) = api::keys::create(keys, BOOTSTRAP_CLIENT_NAME, Role::Client)
        .await
        .map_err(StartupError::Keys)?;
    tracing::info!("first start: created an operator key and a client key");
    Ok(Some(BootstrapKeys {
        operator: (BOOTSTRAP_OPERATOR_NAME.to_owned(), operator),
        client: (BOOTSTRAP_CLIENT_NAME.to_owned(), client),
    }))
}

pub(super) fn keys_failed(e: StoreError) -> StartupError {
    StartupError::Keys(KeyError::Store(e))
}

/// `fulfillment keys`: creates, lists or revokes API keys in the backend's store (the
/// embedded one's SQLite file, beside a running service; or the DynamoDB table).
pub async fn run_keys(settings: KeysSettings) -> Result<(), StartupError> {
    let backend = &settings.backend;
    let keys: Arc<dyn KeyRepository> = match backend.kind {
        Backend::Embedded => {
            let creating = matches!(settings.action, KeysAction::Create { .. });
            if !creating && !backend.store_path.exists() {
                return Err(StartupError::Config(format!(
                    "no store at {} (--db, FULFILLMENT_DB)",
                    backend.store_path.display()
                )));
            }
            Arc::new(open_store(&backend.store_path, |p| SqliteStore::open(p)).await?)
        }
        Backend::Aws => {
            let sdk = aws_sdk_config(&backend.aws).await?;
            Arc::new(DynamoStore::new(
                aws_sdk_dynamodb::Client::new(&sdk),
                backend.aws.table.clone(),
            ))
        }
    };
    let mut out = std::io::stdout().lock();
    match &settings.action {
        KeysAction::Create { name, role } => {
            let (text, key) = api::keys::create(keys.as_ref(), name, *role)
                .await
                .map_err(StartupError::Keys)?;
            let _ = writeln!(out, "{}", text.expose());
            eprintln!(
                "key {} for {} ({}): shown this once, only its hash is kept",
                key.key_id,
                key.principal,
                key.role.as_str()
            );
        }
        KeysAction::List => {
            let listed = keys.list_keys().await.map_err(keys_failed)?;
            let _ = writeln!(out, "key_id\tprincipal\trole\tcreated\tlast_used\trevoked");
            for key in &listed {
                let _ = writeln!(out, "{}", api::keys::list_line(key));
            }
        }
        KeysAction::Revoke { key_id } => {
            match keys
                .revoke(key_id, chrono::Utc::now())
                .await
                .map_err(keys_failed)?
            {
                Some(key) => {
                    let _ = writeln!(out, "{}", api::keys::list_line(&key));
                    eprintln!(
                        "revoked: every replica refuses it within {} s",
                        http::auth::KEY_CACHE_TTL.as_secs()
                    );
                }
                None => {
                    return Err(StartupError::Config(format!("no key {key_id:?}")));
                }
            }
        }
    }
    let _ = out.flush();
    Ok(())
}
