//! The guard against server-side request forgery: a client's webhook URL must not make the
//! service call into its own network. No delivery goes to a loopback, private, link-local,
//! shared (CGNAT), unspecified, multicast, documentation or otherwise reserved address unless
//! an operator allows private targets (`--webhook-allow-private`, for a receiver on the same
//! network or a test).
//!
//! Checked twice: a URL whose host is an address, when it is registered; and every address a
//! host name resolves to, at each delivery (the deliveries' resolver drops the forbidden ones,
//! so a name that points, or is later pointed, at a private address reaches nothing). Redirects
//! are not followed, so a public receiver cannot bounce the request inward.

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Whether `ip` is an address on the public internet.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => is_public_v4(a),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(a),
        },
    }
}

fn is_public_v4(a: Ipv4Addr) -> bool {
    let [b0, b1, b2, _] = a.octets();
    let reserved = a.is_loopback()
        || a.is_private()
        || a.is_link_local()
        || a.is_unspecified()
        || a.is_broadcast()
        || a.is_multicast()
        || a.is_documentation()
        || b0 == 0
        || b0 >= 240
        // Shared address space (carrier-grade NAT), 100.64.0.0/10.
        || (b0 == 100 && (b1 & 0xc0) == 64)
        // IETF protocol assignments, 192.0.0.0/24; benchmarking, 198.18.0.0/15.
        || (b0 == 192 && b1 == 0 && b2 == 0)
        || (b0 == 198 && (b1 & 0xfe) == 18);
    !reserved
}

fn is_public_v6(a: Ipv6Addr) -> bool {
    let s = a.segments();
    let reserved = a.is_loopback()
        || a.is_unspecified()
        || a.is_multicast()
        // Unique local fc00::/7, link-local fe80::/10, site-local fec0::/10.
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        // Documentation 2001:db8::/32; NAT64 64:ff9b::/96 (it reaches IPv4 addresses).
        || (s[0] == 0x2001 && s[1] == 0x0db8)
        || (s[0] == 0x0064 && s[1] == 0xff9b);
    !reserved
}

/// `raw` as an endpoint URL, or why it cannot be one: `https` (or `http` where private targets
/// are allowed: a test or a private network), a host, no credentials, and a host that is not
/// an address of a private network unless allowed.
pub fn check_url(raw: &str, allow_private: bool) -> Result<Url, String> {
    if raw.len() > 2048 {
        return Err("must be at most 2048 characters".to_owned());
    }
    let url = Url::parse(raw).map_err(|e| format!("is not a URL: {e}"))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_private => {}
        "http" => return Err("must be https".to_owned()),
        other => return Err(format!("must be https, not {other}")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry credentials".to_owned());
    }
    let host = url.host().ok_or("must have a host")?;
    if !allow_private {
        let forbidden = match host {
            url::Host::Ipv4(a) => !is_public(IpAddr::V4(a)),
            url::Host::Ipv6(a) => !is_public(IpAddr::V6(a)),
            url::Host::Domain(d) => {
                let d = d.trim_end_matches('.').to_ascii_lowercase();
                d == "localhost" || d.ends_with(".localhost") || d.ends_with(".internal")
            }
        };
        if forbidden {
            return Err(
                "must not point at a loopback, private or link-local address (an operator may \
                 allow them with --webhook-allow-private)"
                    .to_owned(),
            );
        }
    }
    Ok(url)
}

/// The deliveries' resolver: the system's, less every forbidden address. A name with none
/// left fails to resolve, and the attempt records why.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver;

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> =
                all.iter().copied().filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                let error: Box<dyn std::error::Error + Send + Sync> = format!(
                    "{host} resolves to no public address ({} forbidden)",
                    all.len()
                )
                .into();
                return Err(error);
            }
            let addrs: Addrs = Box::new(public.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_reserved_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "192.0.2.1",
            "198.18.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "2001:db8::1",
            "64:ff9b::a00:1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
        ] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn a_url_must_be_https_to_a_host_that_is_not_private() {
        assert!(check_url("https://hooks.example.com/orders", false).is_ok());
        for bad in [
            "http://hooks.example.com/",
            "ftp://hooks.example.com/",
            "https://user:pw@hooks.example.com/",
            "https://127.0.0.1/",
            "https://[::1]:8443/",
            "https://169.254.169.254/latest/meta-data",
            "https://localhost/",
            "https://api.localhost/",
            "https://10.0.0.8/",
            "not a url",
        ] {
            assert!(check_url(bad, false).is_err(), "{bad}");
        }
        assert!(check_url("http://127.0.0.1:9000/hook", true).is_ok());
    }
}
