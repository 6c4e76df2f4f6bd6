use super::*;

fn proxies(vars: &[(&str, &str)]) -> Proxies {
    Proxies::from_vars(|name| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    })
}

fn via(p: &Proxies, url: &str) -> Option<String> {
    p.for_url(&Url::parse(url).unwrap()).map(Url::to_string)
}

const HTTP: &str = "http://proxy.corp:3128/";

#[test]
fn a_proxy_without_a_scheme_is_http_and_schemes_pick_their_variable() {
    let p = proxies(&[("HTTP_PROXY", "proxy.corp:3128")]);
    assert_eq!(via(&p, "http://quay.io/v2/").as_deref(), Some(HTTP));
    assert_eq!(via(&p, "https://quay.io/v2/"), None, "HTTPS_PROXY is unset");
    let p = proxies(&[("HTTPS_PROXY", "https://secure.corp"), ("HTTP_PROXY", "")]);
    assert_eq!(
        via(&p, "https://quay.io/v2/").as_deref(),
        Some("https://secure.corp/")
    );
    assert_eq!(via(&p, "http://quay.io/v2/"), None);
}

#[test]
fn upper_case_wins_and_an_empty_upper_case_falls_back_to_lower_case() {
    let p = proxies(&[("HTTP_PROXY", "upper:1"), ("http_proxy", "lower:1")]);
    assert_eq!(via(&p, "http://a.io/").as_deref(), Some("http://upper:1/"));
    let p = proxies(&[("HTTP_PROXY", ""), ("http_proxy", "lower:1")]);
    assert_eq!(via(&p, "http://a.io/").as_deref(), Some("http://lower:1/"));
}

#[test]
fn loopback_and_localhost_are_never_proxied() {
    let p = proxies(&[("HTTP_PROXY", "proxy.corp:3128")]);
    for url in [
        "http://localhost:5000/",
        "http://127.0.0.1:5000/",
        "http://127.9.9.9/",
        "http://[::1]:5000/",
    ] {
        assert_eq!(via(&p, url), None, "{url}");
    }
}

#[test]
fn no_proxy_domains_match_as_go_does() {
    let p = proxies(&[
        ("HTTPS_PROXY", "proxy.corp:3128"),
        (
            "NO_PROXY",
            "Example.com, .sub.test,*.star.test,ported.io:443",
        ),
    ]);
    let exempt = [
        "https://example.com/",
        "https://a.example.com/",
        "https://a.sub.test/",
        "https://a.star.test/",
        "https://ported.io/",
    ];
    for url in exempt {
        assert_eq!(via(&p, url), None, "{url} is in NO_PROXY");
    }
    let proxied = [
        "https://notexample.com/",
        "https://sub.test/",
        "https://star.test/",
        "https://ported.io:8443/",
    ];
    for url in proxied {
        assert!(via(&p, url).is_some(), "{url} is not in NO_PROXY");
    }
}

#[test]
fn no_proxy_addresses_ranges_and_star() {
    let p = proxies(&[
        ("HTTP_PROXY", "proxy.corp:3128"),
        (
            "no_proxy",
            "10.0.0.0/8,192.168.1.1,[2001:db8::2]:8080,fd00::/8",
        ),
    ]);
    for url in [
        "http://10.1.2.3/",
        "http://192.168.1.1:5000/",
        "http://[2001:db8::2]:8080/",
        "http://[fd12::1]/",
    ] {
        assert_eq!(via(&p, url), None, "{url} is in NO_PROXY");
    }
    for url in [
        "http://11.0.0.1/",
        "http://192.168.1.2/",
        "http://[2001:db8::2]:80/",
    ] {
        assert!(via(&p, url).is_some(), "{url} is not in NO_PROXY");
    }
    let p = proxies(&[("HTTP_PROXY", "proxy.corp:3128"), ("NO_PROXY", "*")]);
    assert_eq!(via(&p, "http://quay.io/"), None);
}

#[test]
fn a_client_is_told_go_s_answer_for_its_own_registry() {
    let p = proxies(&[
        ("HTTPS_PROXY", "proxy.corp:3128"),
        ("NO_PROXY", "mirror.corp:5000,*.internal"),
    ]);
    let proxied = p.for_client("https", "quay.io");
    assert_eq!(proxied.https.as_deref(), Some("http://proxy.corp:3128/"));
    assert_eq!(
        proxied.no_proxy,
        "localhost,127.0.0.0/8,::1,mirror.corp,.internal"
    );
    let exempt = p.for_client("https", "mirror.corp:5000");
    assert!(exempt.no_proxy.ends_with(",mirror.corp"), "{exempt:?}");
    assert!(Proxies::default().is_empty());
}
