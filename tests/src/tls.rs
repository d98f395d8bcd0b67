//! A private certificate authority for TLS tests, made with rcgen on aws-lc-rs.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
    PKCS_ECDSA_P256_SHA256, PKCS_RSA_SHA256, SignatureAlgorithm,
};

#[derive(Debug)]
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A server certificate chain and its key, in PEM.
#[derive(Debug)]
pub struct ServerCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestCa {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("CA key");
        TestCa {
            issuer: CertifiedIssuer::self_signed(params, key).expect("CA certificate"),
        }
    }

    /// The CA certificate, as a client's trust file.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `localhost` and `127.0.0.1`, issued by this CA, with an ECDSA
    /// P-256 key.
    pub fn server_cert(&self) -> ServerCert {
        self.server_cert_for(&PKCS_ECDSA_P256_SHA256)
    }

    /// The same with an RSA-2048 key, cert-manager's default.
    pub fn server_cert_rsa(&self) -> ServerCert {
        self.server_cert_for(&PKCS_RSA_SHA256)
    }

    fn server_cert_for(&self, algorithm: &'static SignatureAlgorithm) -> ServerCert {
        let params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("server params");
        let key = KeyPair::generate_for(algorithm).expect("server key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("server certificate");
        ServerCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}
