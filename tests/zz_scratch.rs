use turnstile::domain::parameter;
#[test]
fn scratch() {
    for t in [
        "where is my order ped 11427",
        "agora o rastreio pedido 382 406",
        "cadê meu pedido ped 11427",
    ] {
        println!("{t:?} -> {:?}", parameter::content_words(t, &[]));
    }
}
